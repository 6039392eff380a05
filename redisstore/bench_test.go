package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
)

// BenchmarkTake measures one goroutine's Take against the private Redis
// (latency) and 64 goroutines' (throughput); bench/redis_test.go compares
// with other libraries.
func BenchmarkTake(b *testing.B) {
	rdb := standaloneClient(b)
	policies := []floodgate.Policy{{Name: "api", Algorithm: floodgate.GCRA, Quota: 100, Window: time.Second, Burst: 100}}
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	b.Run("Single", func(b *testing.B) {
		s := newTestStore(b, rdb)
		res := make([]floodgate.Result, 1)
		ctx := context.Background()
		for i := 0; b.Loop(); i++ {
			if err := s.Take(ctx, keys[i%len(keys)], one, policies, res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parallel64", func(b *testing.B) {
		s := newTestStore(b, rdb)
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			res := make([]floodgate.Result, 1)
			ctx := context.Background()
			i := 0
			for pb.Next() {
				i++
				if err := s.Take(ctx, keys[i%len(keys)], one, policies, res); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	})
	b.Run("RawFcall", func(b *testing.B) {
		ctx := context.Background()
		prefix := newPrefix(b, rdb)
		if err := rdb.FunctionLoadReplace(ctx, library).Err(); err != nil {
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			// One GCRA decision: n=1, slack=0, now=-1 (server TIME), cost 1, 1 policy.
			if err := rdb.FCall(ctx, functionName, []string{prefix + "{" + keys[i%len(keys)] + "}:api:gcra"}, 1, 0, -1, 1, 1, 5, 100, 100, 1000000).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Ping", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			rdb.Ping(ctx)
		}
	})
}
