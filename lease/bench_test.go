package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/lease"
	"github.com/floodgate/floodgate/redisstore"
)

// BenchmarkHotKey: one key under a quota no load reaches, decided from
// every goroutine, on Redis at $FLOODGATE_TEST_REDIS directly and through
// leases of 10 ms; calls/op is the share of decisions that reach Redis.
func BenchmarkHotKey(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: testkit.Env(b, "FLOODGATE_TEST_REDIS")})
	defer rdb.Close()
	store, err := redisstore.New(rdb, redisstore.WithTimeout(time.Second), redisstore.WithPrefix(fmt.Sprintf("fg-lease-bench-%d:", time.Now().UnixNano())))
	if err != nil {
		b.Fatal(err)
	}
	ps := []floodgate.Policy{{Name: "hot", Algorithm: floodgate.TokenBucket, Quota: 100_000_000, Window: time.Second}}
	leased, err := lease.New(store, 10*time.Millisecond, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		store floodgate.Store
	}{{"redis", store}, {"leased", leased}} {
		b.Run(c.name, func(b *testing.B) {
			before := leased.StoreCalls()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				res := make([]floodgate.Result, 1)
				for pb.Next() {
					if err := c.store.Take(context.Background(), "hot", floodgate.Cost{Requests: 1}, ps, res); err != nil || !res[0].Allowed {
						b.Errorf("%v %+v", err, res[0])
						return
					}
				}
			})
			if c.store == leased {
				b.ReportMetric(float64(leased.StoreCalls()-before)/float64(b.N), "calls/op")
			}
		})
	}
}
