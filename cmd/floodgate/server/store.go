package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/ops/reduce"
	"github.com/floodgate/floodgate/redisstore"
)

// newLocalStore is what rules failing to local decide on while the store fails.
func newLocalStore() (*memorystore.Store, error) {
	return memorystore.New(memorystore.WithMaxKeys(100_000))
}

// nearCacheMin is the shortest Retry-After the daemon's near cache keeps:
// long enough that an entry is likely to answer several requests, short
// enough that a token bucket refilling 100 units a second (a retry-after of
// 10 ms) is shielded too.
const nearCacheMin = 10 * time.Millisecond

// redisMaxBatch is the most decisions one call carries, the Redis store's
// default: about a millisecond of Redis's time, which no other client
// waits longer for.
const redisMaxBatch = 128

// storeOpeners open each kind of store the configuration knows
// (config.StoreKinds; TestEveryStoreKindOpened), setting s.store and,
// for a store behind a connection, s.ping.
var storeOpeners = map[string]func(s *Server, sc config.Store) error{
	config.StoreMemory: (*Server).openMemory,
	config.StoreRedis:  (*Server).openRedis,
}

// openStore connects the store cfg describes. A Redis that is down is not
// an error here: decisions follow the failure mode and /readyz says 503
// until it answers.
func (s *Server) openStore(cfg *config.Config) error {
	open, ok := storeOpeners[cfg.Store.Type]
	if !ok { // validation refuses it first
		return fmt.Errorf("server: unknown store %q", cfg.Store.Type)
	}
	return open(s, cfg.Store)
}

// openMemory opens the memory store and its metrics.
func (s *Server) openMemory(sc config.Store) error {
	m, err := memorystore.New(memorystore.WithMaxKeys(sc.Memory.MaxKeys))
	if err != nil {
		return fmt.Errorf("server: store.memory: %w", err)
	}
	// What an operator sizes store.memory.max_keys by.
	err = errors.Join(
		s.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "floodgate_memory_keys", Help: "Keys the memory store holds, expired ones not yet swept included.",
		}, func() float64 { return float64(m.Len()) })),
		s.reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "floodgate_memory_evictions_total", Help: "Live keys the memory store evicted to stay within store.memory.max_keys.",
		}, func() float64 { return float64(m.Evictions()) })),
	)
	if err != nil {
		m.Close()
		return fmt.Errorf("server: metrics: %w", err)
	}
	s.store = m
	s.closeFns = append(s.closeFns, m.Close)
	return nil
}

// openRedis connects the Redis store of store.redis.
func (s *Server) openRedis(sc config.Store) error {
	client, err := RedisClient(sc.Redis)
	if err != nil {
		return err
	}
	opts := []redisstore.Option{redisstore.WithTimeout(sc.Redis.Timeout.D()), redisstore.WithPrefix(sc.Redis.Prefix),
		redisstore.WithBatching(redisMaxBatch, sc.Redis.MaxInFlight)}
	if d := sc.Redis.Durability; d != nil {
		opts = append(opts, redisstore.WithDurability(d.Replicas, d.Timeout.D()))
	}
	if sc.Redis.NearCache > 0 {
		opts = append(opts, redisstore.WithNearCache(sc.Redis.NearCache, nearCacheMin))
	}
	st, err := redisstore.New(client, opts...)
	if err != nil {
		client.Close()
		return fmt.Errorf("server: redis store: %w", err)
	}
	s.store = st
	s.ping = func(ctx context.Context) error { return client.Ping(ctx).Err() }
	s.closeFns = append(s.closeFns, client.Close)
	return nil
}

// reductionStores keep capacity reductions in each kind of store
// (ops.reductions, a config.StoreKinds name; TestEveryStoreKindOpened);
// nil is the reduce package's default, this process's memory.
var reductionStores = map[string]func(s *Server, sc config.Store) (reduce.ReductionStore, error){
	config.StoreMemory: func(*Server, config.Store) (reduce.ReductionStore, error) { return nil, nil },
	config.StoreRedis: func(s *Server, sc config.Store) (reduce.ReductionStore, error) {
		client, err := RedisClient(sc.Redis)
		if err != nil {
			return nil, err
		}
		s.closeFns = append(s.closeFns, client.Close)
		return reduce.NewRedisReductions(client, sc.Redis.Prefix), nil
	},
}

// RedisClient builds the go-redis client for a store.redis section:
// standalone from URL, a ClusterClient from Cluster, or a failover client
// from Sentinel. Every one honours context deadlines on its sockets
// (ContextTimeoutEnabled), so that the store runs a lone decision on the
// caller's goroutine instead of handing it to another and back.
func RedisClient(rc config.Redis) (redis.UniversalClient, error) {
	switch {
	case rc.URL != "":
		o, err := redis.ParseURL(rc.URL)
		if err != nil {
			// go-redis quotes the URL, password and all.
			return nil, errors.New("server: store.redis.url: not a Redis URL")
		}
		o.ContextTimeoutEnabled = true
		return redis.NewClient(o), nil
	case len(rc.Cluster) > 0:
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Cluster, Username: rc.Username, Password: rc.Password,
			ContextTimeoutEnabled: true}), nil
	case rc.Sentinel != nil:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: rc.Sentinel.Master, SentinelAddrs: rc.Sentinel.Addrs,
			SentinelPassword: rc.Sentinel.Password, Username: rc.Username, Password: rc.Password,
			ContextTimeoutEnabled: true,
		}), nil
	}
	return nil, fmt.Errorf("server: store.redis needs url, cluster or sentinel")
}
