package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
	single := func(b *testing.B, rdb *redis.Client) {
		s := newTestStore(b, rdb)
		res := make([]floodgate.Result, 1)
		ctx := context.Background()
		for i := 0; b.Loop(); i++ {
			if err := s.Take(ctx, keys[i%len(keys)], one, policies, res); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Single: go-redis' default client, so each call runs on an executor
	// goroutine; SingleInline: a client with ContextTimeoutEnabled, whose
	// lone calls run on the caller's goroutine.
	b.Run("Single", func(b *testing.B) { single(b, rdb) })
	b.Run("SingleInline", func(b *testing.B) {
		inline := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, ContextTimeoutEnabled: true})
		b.Cleanup(func() { inline.Close() }) // after newPrefix's cleanup, which uses it
		single(b, inline)
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
		// The same decision's FCALL sent by hand, without the Store around it.
		ctx := context.Background()
		prefix := newPrefix(b, rdb)
		if err := rdb.FunctionLoadReplace(ctx, library).Err(); err != nil {
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			r := request1(prefix, keys[i%len(keys)], policies, -1, 1)
			if err := rdb.Process(ctx, evalCmd(ctx, "fcall", functionNameArg, 0, []*request{r})); err != nil {
				b.Fatal(err)
			}
			putRequest(r)
		}
	})
	b.Run("Ping", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			rdb.Ping(ctx)
		}
	})
}
