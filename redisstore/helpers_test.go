package redisstore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/internal/testkit"
)

func standaloneClient(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: testkit.Env(t, "FLOODGATE_TEST_REDIS")})
	t.Cleanup(func() { rdb.Close() })
	ping(t, rdb)
	return rdb
}

func clusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	addrs := strings.Split(testkit.Env(t, "FLOODGATE_TEST_REDIS_CLUSTER"), ",")
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { rdb.Close() })
	ping(t, rdb)
	return rdb
}

func sentinelClient(t testing.TB) *redis.Client {
	t.Helper()
	addrs := strings.Split(testkit.Env(t, "FLOODGATE_TEST_SENTINEL"), ",")
	master := testkit.Env(t, "FLOODGATE_TEST_SENTINEL_MASTER")
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: master, SentinelAddrs: addrs})
	t.Cleanup(func() { rdb.Close() })
	ping(t, rdb)
	return rdb
}

func ping(t testing.TB, rdb redis.UniversalClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis not reachable (%v): run scripts/services-up.sh or `make test`", err)
	}
}

var (
	runID   = fmt.Sprintf("fgtest:%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	storeNo atomic.Int64
)

// newPrefix returns a key prefix no other store of this or any earlier run
// uses, and registers a cleanup that fails the test if any key under it has
// no TTL, then deletes them.
func newPrefix(t testing.TB, rdb redis.UniversalClient) string {
	t.Helper()
	prefix := fmt.Sprintf("%s:%d:", runID, storeNo.Add(1))
	t.Cleanup(func() { checkTTLs(t, rdb, prefix, true) })
	return prefix
}

func newTestStore(t testing.TB, rdb redis.UniversalClient, opts ...Option) *Store {
	t.Helper()
	s, err := New(rdb, append([]Option{WithPrefix(newPrefix(t, rdb)), WithTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkTTLs scans every master for keys under prefix and reports any whose
// PTTL is -1 (no expiry); with del it then deletes them. It returns the
// number of keys found.
func checkTTLs(t testing.TB, rdb redis.UniversalClient, prefix string, del bool) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var err error
	var found atomic.Int64
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return scanKeys(ctx, m, prefix, &found, t, del)
		})
	case *redis.Client:
		err = scanKeys(ctx, c, prefix, &found, t, del)
	default:
		t.Fatalf("checkTTLs: unsupported client %T", rdb)
	}
	if err != nil {
		t.Errorf("scanning keys under %q: %v", prefix, err)
	}
	return int(found.Load())
}

func scanKeys(ctx context.Context, c *redis.Client, prefix string, n *atomic.Int64, t testing.TB, del bool) error {
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		n.Add(1)
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			return err
		}
		if ttl == -1 {
			t.Errorf("key %q on %s has no TTL", k, c.Options().Addr)
		}
		if del {
			if err := c.Del(ctx, k).Err(); err != nil {
				return err
			}
		}
	}
	return iter.Err()
}
