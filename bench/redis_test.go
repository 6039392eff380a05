package bench

// Redis stores side by side on one local Redis: Floodgate's redisstore,
// github.com/go-redis/redis_rate/v10 (GCRA in one EVALSHA per call) and
// ulule/limiter's Redis store (fixed window, one EVALSHA per call). Every
// limiter allows 100 requests per second per key with a burst of 100, keys
// are "user:<n>" over 10,000 keys (built before timing), and each call asks
// "may this key spend one request now?" — about 12 calls per key per
// second at 120,000/s, so all are admitted and every call writes.
//
// Run (docs/BENCHMARKS.md, "Redis"):
//
//	. /tmp/floodgate-test/env
//	cd bench && go test -run '^$' -bench '^BenchmarkRedis' -benchtime 3s -count 3
//
// FLOODGATE_BENCH_REDIS overrides the server (default $FLOODGATE_TEST_REDIS).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	ulule "github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/redisstore"
)

const (
	redisKeys        = 10_000
	redisConcurrency = 64 // goroutines of the parallel workloads
)

// redisKeyNames is built on first use, like manyKeyNames.
var redisKeyNames = sync.OnceValue(func() []string {
	k := make([]string, redisKeys)
	for i := range k {
		k[i] = "user:" + strconv.Itoa(i)
	}
	return k
})

// redisAddr is the server every Redis benchmark uses.
func redisAddr(tb testing.TB) string {
	if a := os.Getenv("FLOODGATE_BENCH_REDIS"); a != "" {
		return a
	}
	if a := os.Getenv("FLOODGATE_TEST_REDIS"); a != "" {
		return a
	}
	tb.Fatal("FLOODGATE_TEST_REDIS is not set: run scripts/services-up.sh and `. /tmp/floodgate-test/env`")
	return ""
}

// newRedisClient returns the client every contender shares: go-redis'
// defaults plus ContextTimeoutEnabled, which docs/REDIS.md recommends (it
// makes socket I/O honour context deadlines, so the store can run a lone
// call on the caller's goroutine; the peers' single EVALSHA is unaffected).
func newRedisClient(tb testing.TB) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr(tb), ContextTimeoutEnabled: true})
	tb.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		tb.Fatalf("redis at %s: %v", rdb.Options().Addr, err)
	}
	return rdb
}

// redisContender builds one limiter; its take reports whether key was
// admitted and is safe for concurrent use.
type redisContender struct {
	name string
	open func(tb testing.TB, rdb *redis.Client) (take func(ctx context.Context, key string) bool)
}

var redisContenders = []redisContender{
	{"floodgate", func(tb testing.TB, rdb *redis.Client) func(context.Context, string) bool {
		// A 1 s timeout instead of the default 50 ms: the peers have none
		// but go-redis' 3 s read timeout, and a loaded machine must not
		// turn into failed calls.
		st, err := redisstore.New(rdb, redisstore.WithPrefix(fmt.Sprintf("bench:%d:", time.Now().UnixNano())),
			redisstore.WithTimeout(time.Second))
		if err != nil {
			tb.Fatal(err)
		}
		lim, err := floodgate.NewLimiter(st, []floodgate.Policy{{
			Name: "api", Algorithm: floodgate.GCRA, Quota: 100, Window: time.Second, Burst: 100,
		}})
		if err != nil {
			tb.Fatal(err)
		}
		return func(ctx context.Context, key string) bool {
			d, err := lim.Take(ctx, key, 1)
			if err != nil {
				tb.Error(err)
			}
			return d.Allowed
		}
	}},
	{"redis_rate", func(tb testing.TB, rdb *redis.Client) func(context.Context, string) bool {
		lim := redis_rate.NewLimiter(rdb)
		limit := redis_rate.Limit{Rate: 100, Burst: 100, Period: time.Second}
		return func(ctx context.Context, key string) bool {
			r, err := lim.Allow(ctx, key, limit)
			if err != nil {
				tb.Error(err)
				return false
			}
			return r.Allowed > 0
		}
	}},
	{"ulule", func(tb testing.TB, rdb *redis.Client) func(context.Context, string) bool {
		store, err := ululeredis.NewStoreWithOptions(rdb, ulule.StoreOptions{Prefix: fmt.Sprintf("ulule:%d", time.Now().UnixNano())})
		if err != nil {
			tb.Fatal(err)
		}
		lim := ulule.New(store, ulule.Rate{Period: time.Second, Limit: 100})
		return func(ctx context.Context, key string) bool {
			c, err := lim.Get(ctx, key)
			if err != nil {
				tb.Error(err)
				return false
			}
			return !c.Reached
		}
	}},
}

// BenchmarkRedis reports decisions/s with 64 concurrent goroutines
// (Parallel64) and the latency of one goroutine (Single) for each limiter,
// then Floodgate's and redis_rate's latency measured call by call in turn
// (Interleaved), also beside calls that do less than either (Floor).
func BenchmarkRedis(b *testing.B) {
	names := redisKeyNames()
	for _, c := range redisContenders {
		b.Run("Parallel64/"+c.name, func(b *testing.B) {
			take := c.open(b, newRedisClient(b))
			var next atomic.Uint64
			b.SetParallelism((redisConcurrency + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				i := next.Add(7919)
				for pb.Next() {
					i++
					take(ctx, names[i%redisKeys])
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
	for _, c := range redisContenders {
		b.Run("Single/"+c.name, func(b *testing.B) {
			take := c.open(b, newRedisClient(b))
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				take(ctx, names[i%redisKeys])
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
	b.Run("Interleaved", interleaved)
	b.Run("Floor", floor)
}

// interleaved runs Floodgate and redis_rate call by call in turn (one
// goroutine, each limiter on its own client of the same server) and reports
// each one's mean latency and their ratio. Separate runs of one contender
// after the other differ by up to 2× on this shared machine as its speed
// moves from minute to minute; alternating single calls exposes both to
// the same moments.
func interleaved(b *testing.B) {
	calls := []timedCall{{"floodgate", nil}, {"redis_rate", nil}}
	for i := range calls {
		calls[i].take = openContender(b, calls[i].name)
	}
	reportInterleaved(b, calls)
}

// floor runs, interleaved with Floodgate and redis_rate, three calls that
// do less than either limiter, each on its own client: FCALL of a function
// and EVALSHA of a script that only return four integers (with one key and
// redis_rate's four arguments), and EVALSHA of a script that makes
// redis_rate's three commands (TIME, GET, SET … EX) without its arithmetic.
// They show how much of a decision's latency any Lua call costs here.
func floor(b *testing.B) {
	ctx := context.Background()
	rdb := newRedisClient(b)
	const lib = "#!lua name=floodgate_bench_floor\nredis.register_function('floodgate_bench_nop', function() return {1, 2, 3, 4} end)\n"
	if err := rdb.FunctionLoadReplace(ctx, lib).Err(); err != nil {
		b.Fatal(err)
	}
	nop := redis.NewScript("return {1, 2, 3, 4}")
	commands := redis.NewScript("local t = redis.call('TIME'); local v = redis.call('GET', KEYS[1]); " +
		"redis.call('SET', KEYS[1], t[1] .. '.' .. t[2], 'EX', 1); return {1, 2, 3, 4}")
	calls := []timedCall{{"floodgate", nil}, {"redis_rate", nil},
		{"fcall-nop", func(ctx context.Context, key string) bool {
			return rdb.FCall(ctx, "floodgate_bench_nop", []string{"floor:" + key}, 100, 100, 1, 1).Err() == nil
		}},
		{"evalsha-nop", func(ctx context.Context, key string) bool {
			return nop.Run(ctx, rdb, []string{"floor:" + key}, 100, 100, 1, 1).Err() == nil
		}},
		{"evalsha-time-get-set", func(ctx context.Context, key string) bool {
			return commands.Run(ctx, rdb, []string{"floor:" + key}, 100, 100, 1, 1).Err() == nil
		}},
	}
	calls[0].take, calls[1].take = openContender(b, "floodgate"), openContender(b, "redis_rate")
	reportInterleaved(b, calls)
}

// timedCall is one call that reportInterleaved times.
type timedCall struct {
	name string
	take func(ctx context.Context, key string) bool
}

func openContender(b *testing.B, name string) func(context.Context, string) bool {
	for _, c := range redisContenders {
		if c.name == name {
			return c.open(b, newRedisClient(b))
		}
	}
	b.Fatalf("no contender %q", name)
	return nil
}

// reportInterleaved makes b.N rounds of one call each of calls, in a new
// order each round (one of 64 fixed random orders, so that no call always
// follows the same other), and reports each one's mean latency (µs) and,
// when calls[0] and calls[1] are Floodgate and redis_rate, their ratio.
func reportInterleaved(b *testing.B, calls []timedCall) {
	names := redisKeyNames()
	rng := rand.New(rand.NewPCG(1, 2))
	orders := make([][]int, 64)
	for i := range orders {
		orders[i] = rng.Perm(len(calls))
	}
	ctx := context.Background()
	spent := make([]time.Duration, len(calls))
	b.ResetTimer()
	for i := range b.N {
		key := names[i%redisKeys]
		for _, c := range orders[i%len(orders)] {
			t := time.Now()
			calls[c].take(ctx, key)
			spent[c] += time.Since(t)
		}
	}
	for i, c := range calls {
		b.ReportMetric(float64(spent[i].Nanoseconds())/1e3/float64(b.N), c.name+"-µs")
	}
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "ratio")
}
