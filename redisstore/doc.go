// Package redisstore is a floodgate.Store in Redis, shared by every process
// that points at the same server, Sentinel group or Cluster (REQUIREMENTS
// S1, S2, A5). It takes a go-redis UniversalClient, so an application's
// existing standalone, Sentinel (redis.NewFailoverClient) or Cluster client
// plugs in.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	store, err := redisstore.New(rdb)
//	if err != nil { ... }
//	limiter, err := floodgate.NewLimiter(store, policies,
//		floodgate.WithFailureMode(floodgate.FailOpen))
//
// Every decision is one call of Lua code that reads the time from the Redis
// server (TIME), decides all policies of the key, writes all or nothing and
// sets each key's expiry in the same step. The code is built from one file
// per algorithm and a dispatcher (lua/). On Redis 7 and later it is loaded
// as a function library (FUNCTION LOAD) and called with FCALL, so that a
// call defines nothing; where functions are missing or not permitted, it is
// a script called by EVALSHA. An answer saying the code is missing (after a
// restart without persistence, a flush or a failover) reloads it.
//
// Keys are "<prefix>{<partition key>}:<policy>:<algorithm>"; the hash tag
// puts all keys of a decision in one Cluster slot. Partition keys that are
// empty, longer than WithMaxKeyLength, start with '#' or contain '{' or '}'
// are replaced by '#' and 32 hex digits of their SHA-256.
//
// Concurrent Takes, and in-flight slots' acquires and releases (Acquire,
// requests of the same code), are coalesced: while earlier calls wait on
// Redis, new ones queue, and each answered batch is followed at once by one
// script call carrying everything queued (one call per hash slot on a
// Cluster, pipelined per master). A lone caller is sent at once. On a Cluster whose
// slots are moving, only the calls answered MOVED, ASK or TRYAGAIN (which
// did not run) are sent again, so no decision is spent twice; TRYAGAIN is
// retried for up to 2 ms before it counts as a failure. WithNearCache adds an
// in-process cache of denials, so a client that keeps hammering a denied key
// costs Redis nothing until its RetryAfter.
//
// docs/REDIS.md describes the key layout, the scripts, failure modes,
// memory per key and Cluster/Sentinel setup.
package redisstore
