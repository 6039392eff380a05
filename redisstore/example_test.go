package redisstore_test

import (
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/redisstore"
)

// A store over an application's client, falling back to a local share of
// each quota while Redis fails. Neither New nor NewLimiter contacts Redis.
func Example() {
	policies := []floodgate.Policy{{Name: "api", Algorithm: floodgate.GCRA, Quota: 300, Window: time.Minute}}

	rdb := redis.NewClient(&redis.Options{Addr: "10.0.0.5:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()                 // the client is yours: the store's Close leaves it open
	store, err := redisstore.New(rdb) // options below
	if err != nil {
		log.Fatal(err) // floodgate.ErrInvalidOption: a nil client, an option out of range
	}
	defer store.Close() // closes nothing; there for code written for memorystore
	local, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer local.Close()
	// While Redis fails, each of 3 replicas limits alone to a third of each quota
	// (FailToLocal); or WithFailureMode(floodgate.FailOpen), but not both.
	limiter, err := floodgate.NewLimiter(store, policies, floodgate.WithLocalFallback(local, 1.0/3))
	if err != nil {
		log.Fatal(err)
	}

	fmt.Println(limiter.Policies()[0].Name)
	// Output: api
}

// The store of the middleware's documentation, with its per-call timeout.
func ExampleWithTimeout() {
	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379"}) // or NewClusterClient, NewFailoverClient
	store, err := redisstore.New(rdb, redisstore.WithTimeout(redisstore.DefaultTimeout))
	if err != nil {
		log.Fatal(err) // a nil client or an option out of range
	}
	defer rdb.Close()
	_, err = redisstore.New(rdb, redisstore.WithTimeout(0))
	fmt.Println(store != nil, err)
	// Output: true floodgate: invalid option: redisstore: timeout must be positive, got 0s
}

// A Redis Cluster and a Sentinel group plug in alike.
func ExampleNew_clusterAndSentinel() {
	// Cluster: give a few nodes; the client discovers the rest.
	cluster := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		ContextTimeoutEnabled: true,
	})
	// Sentinel: the master name and the sentinels; writes follow failovers.
	sentinel := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: "floodgate", SentinelAddrs: []string{"10.0.0.9:26379"},
		ContextTimeoutEnabled: true,
	})
	// Either (or one from redis.NewUniversalClient) makes a store the same way.
	clusterStore, err := redisstore.New(cluster)
	if err != nil {
		log.Fatal(err)
	}
	sentinelStore, err := redisstore.New(sentinel)
	if err != nil {
		log.Fatal(err)
	}

	defer cluster.Close()
	defer sentinel.Close()
	fmt.Println(clusterStore != nil, sentinelStore != nil)
	// Output: true true
}
