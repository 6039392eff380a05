package redisstore

import (
	"context"
	"strconv"
	"strings"
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
	b.Run("Pipelined16", func(b *testing.B) {
		// Redis' own time per call (usec_per_call of FCALL, from INFO
		// commandstats before and after), with 16 such FCALLs per round
		// trip so that the server is never idle between calls. Other
		// clients' FCALLs on the same server count too: use a private one.
		ctx := context.Background()
		prefix := newPrefix(b, rdb)
		if err := rdb.FunctionLoadReplace(ctx, library).Err(); err != nil {
			b.Fatal(err)
		}
		calls0, usec0 := fcallStats(b, rdb)
		rs := make([]*request, 16)
		for i := 0; b.Loop(); i++ {
			pipe := rdb.Pipeline()
			for j := range rs {
				rs[j] = request1(prefix, keys[(16*i+j)%len(keys)], policies, -1, 1)
				_ = pipe.Process(ctx, evalCmd(ctx, "fcall", functionNameArg, 0, rs[j:j+1]))
			}
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
			for _, r := range rs {
				putRequest(r)
			}
		}
		calls1, usec1 := fcallStats(b, rdb)
		b.ReportMetric(float64(usec1-usec0)/float64(calls1-calls0), "redis-µs/call")
	})
	b.Run("Ping", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			rdb.Ping(ctx)
		}
	})
}

// fcallStats returns the calls and µs of FCALL so far from INFO
// commandstats.
func fcallStats(b *testing.B, rdb *redis.Client) (calls, usec int64) {
	return cmdStats(b, rdb, "fcall")
}

// BenchmarkSlots measures a slot's Acquire and release beside
// BenchmarkTake: both are requests of the function library through the
// batcher, as a Take is (one FCALL each when alone; under load, many in
// one FCALL). One goroutine's latency per acquire-and-release pair and
// Redis's µs per FCALL (other clients' FCALLs on the same server count
// too), and 64 goroutines' pairs per second.
func BenchmarkSlots(b *testing.B) {
	rdb := standaloneClient(b)
	c := floodgate.Concurrency{Name: "inflight", Max: 1 << 20} // never refuses
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	pair := func(b testing.TB, s *Store, ctx context.Context, key string) {
		release, _, ok, err := s.Acquire(ctx, key, c, time.Minute)
		if err != nil || !ok {
			b.Fatalf("Acquire: %v %v", ok, err)
		}
		release()
	}
	b.Run("Single", func(b *testing.B) {
		s := newTestStore(b, rdb)
		ctx := context.Background()
		calls0, usec0 := fcallStats(b, rdb)
		for i := 0; b.Loop(); i++ {
			pair(b, s, ctx, keys[i%len(keys)])
		}
		calls1, usec1 := fcallStats(b, rdb)
		b.ReportMetric(float64(usec1-usec0)/float64(max(calls1-calls0, 1)), "redis-µs/fcall")
	})
	b.Run("Parallel64", func(b *testing.B) {
		s := newTestStore(b, rdb)
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			i := 0
			for pb.Next() {
				i++
				pair(b, s, ctx, keys[i%len(keys)])
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	})
}

// cmdStats returns the calls and µs of a command so far from INFO
// commandstats.
func cmdStats(b *testing.B, rdb *redis.Client, name string) (calls, usec int64) {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+name+":"); ok {
			for _, f := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(f, "=")
				switch k {
				case "calls":
					calls, _ = strconv.ParseInt(v, 10, 64)
				case "usec":
					usec, _ = strconv.ParseInt(v, 10, 64)
				}
			}
		}
	}
	return calls, usec
}

// BenchmarkDurability measures the cost of WithDurability(1, 100 ms) on
// the test services' Sentinel set (a master and one replica on one host):
// one goroutine's latency and 64 goroutines' decisions/s, with and without
// the WAIT that follows each call (docs/REDIS.md, "Failover").
func BenchmarkDurability(b *testing.B) {
	rdb := sentinelClient(b)
	policies := []floodgate.Policy{{Name: "api", Algorithm: floodgate.GCRA, Quota: 100, Window: time.Second, Burst: 100}}
	for _, durable := range []bool{false, true} {
		var opts []Option
		if durable {
			opts = append(opts, WithDurability(1, 100*time.Millisecond))
		}
		name := "Off"
		if durable {
			name = "On"
		}
		b.Run(name+"/Single", func(b *testing.B) {
			s := newTestStore(b, rdb, opts...)
			res := make([]floodgate.Result, 1)
			for i := 0; b.Loop(); i++ {
				if err := s.Take(context.Background(), "user:"+strconv.Itoa(i%1000), one, policies, res); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/Parallel64", func(b *testing.B) {
			s := newTestStore(b, rdb, opts...)
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				res := make([]floodgate.Result, 1)
				for i := 0; pb.Next(); i++ {
					if err := s.Take(context.Background(), "user:"+strconv.Itoa(i%1000), one, policies, res); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
