package bench

// In-memory limiters side by side on the same workloads. Every limiter is
// set to 100 requests per second per key with a burst of 100 (see
// docs/BENCHMARKS.md for how each peer is configured and why that is the
// same work), keys are the same strings ("user:<n>", built before timing),
// and each call asks "may this key spend one request now?".

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
	sethvargomem "github.com/sethvargo/go-limiter/memorystore"
	ulule "github.com/ulule/limiter/v3"
	ululemem "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"
)

const (
	perSecond = 100     // requests per second per key, for every limiter
	burst     = 100     // bucket size / tokens per window, for every limiter
	manyKeys  = 100_000 // keys of the many-keys workloads
)

// takeFunc spends one request for key and reports whether it was admitted.
// A takeFunc is used by one goroutine at a time.
type takeFunc func(key string) bool

// contender is one limiter under test. open builds a fresh instance and
// returns a constructor of per-goroutine takeFuncs (so that each
// RunParallel worker gets its own scratch space) and a function freeing the
// instance.
type contender struct {
	name string
	open func(tb testing.TB) (worker func() takeFunc, closeFn func())
}

func policy(a floodgate.Algorithm) []floodgate.Policy {
	return []floodgate.Policy{{Name: "api", Algorithm: a, Quota: perSecond, Window: time.Second, Burst: burst}}
}

// floodgateStore calls memorystore.Store.Take with a preallocated results
// slice: the hot-path API, which the HTTP middleware uses.
func floodgateStore(a floodgate.Algorithm) func(testing.TB) (func() takeFunc, func()) {
	return func(tb testing.TB) (func() takeFunc, func()) {
		st := testkit.Memory(tb)
		policies := policy(a)
		ctx := context.Background()
		return func() takeFunc {
			results := make([]floodgate.Result, len(policies))
			return func(key string) bool {
				if err := st.Take(ctx, key, floodgate.Cost{Requests: 1}, policies, results); err != nil {
					tb.Error(err)
				}
				return results[0].Allowed
			}
		}, func() { st.Close() }
	}
}

// floodgateLimiter calls floodgate.Limiter.Take, which builds a Decision.
func floodgateLimiter(a floodgate.Algorithm) func(testing.TB) (func() takeFunc, func()) {
	return func(tb testing.TB) (func() takeFunc, func()) {
		st := testkit.Memory(tb)
		l, err := floodgate.NewLimiter(st, policy(a))
		if err != nil {
			tb.Fatal(err)
		}
		ctx := context.Background()
		return func() takeFunc {
			return func(key string) bool {
				d, err := l.Take(ctx, key, 1)
				if err != nil {
					tb.Error(err)
				}
				return d.Allowed
			}
		}, func() { st.Close() }
	}
}

// xtimerate keeps one rate.Limiter per key in a map behind a
// sync.RWMutex: lookups of existing keys, which is what these workloads do
// almost always, share the read lock. A sync.Map was measured too; it was
// slower on 100,000 keys (more pointer chasing per lookup), so the faster
// of the two is the one compared.
func xtimerate(tb testing.TB) (func() takeFunc, func()) {
	var mu sync.RWMutex
	m := make(map[string]*rate.Limiter)
	return func() takeFunc {
		return func(key string) bool {
			mu.RLock()
			l, ok := m[key]
			mu.RUnlock()
			if !ok {
				mu.Lock()
				if l, ok = m[key]; !ok {
					l = rate.NewLimiter(perSecond, burst)
					m[key] = l
				}
				mu.Unlock()
			}
			return l.Allow()
		}
	}, func() {}
}

// ululeLimiter is github.com/ulule/limiter/v3 with its memory store. Get
// counts one request and reports whether the limit is reached.
func ululeLimiter(tb testing.TB) (func() takeFunc, func()) {
	l := ulule.New(ululemem.NewStore(), ulule.Rate{Period: time.Second, Limit: burst})
	ctx := context.Background()
	return func() takeFunc {
		return func(key string) bool {
			c, err := l.Get(ctx, key)
			if err != nil {
				tb.Error(err)
			}
			return !c.Reached
		}
	}, func() {}
}

// sethvargoStore is github.com/sethvargo/go-limiter's memorystore: Tokens
// per Interval for every key.
func sethvargoStore(tb testing.TB) (func() takeFunc, func()) {
	st, err := sethvargomem.New(&sethvargomem.Config{Tokens: burst, Interval: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	return func() takeFunc {
		return func(key string) bool {
			_, _, _, ok, err := st.Take(ctx, key)
			if err != nil {
				tb.Error(err)
			}
			return ok
		}
	}, func() { st.Close(ctx) }
}

var contenders = []contender{
	{"floodgate-tb", floodgateStore(floodgate.TokenBucket)},
	{"floodgate-gcra", floodgateStore(floodgate.GCRA)},
	{"floodgate-limiter-tb", floodgateLimiter(floodgate.TokenBucket)},
	{"floodgate-limiter-gcra", floodgateLimiter(floodgate.GCRA)},
	{"xtimerate", xtimerate},
	{"ulule", ululeLimiter},
	{"sethvargo", sethvargoStore},
}

// manyKeyNames returns the keys of every workload, "user:0" … "user:99999",
// built on first use: as a package variable they would be live heap in
// every process of this test binary, the helper servers of
// scripts/bench-daemon.sh included, and make their collector run less often
// than it would on its own.
var manyKeyNames = sync.OnceValue(func() []string {
	k := make([]string, manyKeys)
	for i := range k {
		k[i] = "user:" + strconv.Itoa(i)
	}
	return k
})

// start opens c and takes each of keys once, so that the timed loop
// measures keys the limiter already holds, as in a steady state.
func start(b *testing.B, c contender, keys []string) func() takeFunc {
	worker, closeFn := c.open(b)
	b.Cleanup(closeFn)
	take := worker()
	for _, k := range keys {
		take(k)
	}
	// Filling 100,000 keys starts a garbage collection that would otherwise
	// still be marking during the timed loop, charging the setup to the
	// contender under test. The loops allocate little or nothing (at most
	// two small objects a call, for ulule).
	runtime.GC()
	return worker
}

// BenchmarkHotKey: one key, one goroutine. At 100 per second the key's
// burst is spent at once, so almost every call is a denial: the cost of
// turning away a client that is over its limit.
func BenchmarkHotKey(b *testing.B) {
	for _, c := range contenders {
		b.Run("lib="+c.name, func(b *testing.B) {
			keys := manyKeyNames()
			take := start(b, c, keys[:1])()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				take(keys[0])
			}
		})
	}
}

// BenchmarkManyKeys: 100,000 keys in turn, one goroutine. Each key comes
// back every 100,000 calls, so a mix of admissions and denials.
func BenchmarkManyKeys(b *testing.B) {
	for _, c := range contenders {
		b.Run("lib="+c.name, func(b *testing.B) {
			keys := manyKeyNames()
			take := start(b, c, keys)()
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for range b.N {
				take(keys[i])
				if i++; i == len(keys) {
					i = 0
				}
			}
		})
	}
}

// BenchmarkManyKeysParallel: 100,000 keys, GOMAXPROCS goroutines, each
// walking the keys from its own starting point.
func BenchmarkManyKeysParallel(b *testing.B) { walkParallel(b, manyKeyNames) }

// BenchmarkManyKeysRandomParallel: as ManyKeysParallel, but the keys come
// in a fixed random order instead of the order they were created in. Real
// clients arrive in no order; walked in creation order, each limiter visits
// its per-key objects in the order it allocated them, which the hardware
// prefetcher rewards.
func BenchmarkManyKeysRandomParallel(b *testing.B) { walkParallel(b, shuffledKeyNames) }

// walkParallel fills every contender with the 100,000 keys, then takes
// them in the given order from GOMAXPROCS goroutines, each starting at its
// own offset.
func walkParallel(b *testing.B, order func() []string) {
	for _, c := range contenders {
		b.Run("lib="+c.name, func(b *testing.B) {
			worker := start(b, c, manyKeyNames())
			keys := order()
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				take := worker()
				i := int(next.Add(1)*7919) % len(keys)
				for pb.Next() {
					take(keys[i])
					if i++; i == len(keys) {
						i = 0
					}
				}
			})
		})
	}
}

// shuffledKeyNames is manyKeyNames in a fixed random order.
var shuffledKeyNames = sync.OnceValue(func() []string {
	k := slices.Clone(manyKeyNames())
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(k), func(i, j int) { k[i], k[j] = k[j], k[i] })
	return k
})

// BenchmarkMemory reports the heap cost of one million live keys in
// bytes/key: HeapAlloc growth after runtime.GC, divided by the key count,
// the limiter's own structures and its copies of the keys included.
func BenchmarkMemory(b *testing.B) {
	const n = 1_000_000
	for _, c := range contenders {
		if c.name == "floodgate-limiter-tb" || c.name == "floodgate-limiter-gcra" {
			continue // the same store as floodgate-tb and floodgate-gcra
		}
		b.Run("lib="+c.name+"/keys=1M", func(b *testing.B) {
			var perKey float64
			for range b.N {
				before := heapAlloc()
				worker, closeFn := c.open(b)
				take := worker()
				buf := []byte("user:")
				for i := range n {
					buf = strconv.AppendInt(buf[:5], int64(i), 10)
					take(string(buf))
				}
				perKey = float64(int64(heapAlloc())-int64(before)) / n
				runtime.KeepAlive(take)
				closeFn()
			}
			b.ReportMetric(perKey, "bytes/key")
		})
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestSameLimit checks that every contender is configured alike: a fresh
// key admits its burst of 100 at once, and then only what the rate can
// have refilled in the time the calls took (at most one window's worth for
// the fixed-window peers, whose windows start at the key's first request).
func TestSameLimit(t *testing.T) {
	for _, c := range contenders {
		t.Run(c.name, func(t *testing.T) {
			worker, closeFn := c.open(t)
			defer closeFn()
			take := worker()
			begin := time.Now()
			allowed := 0
			for range 3 * burst {
				if take("fresh-key") {
					allowed++
				}
			}
			elapsed := time.Since(begin)
			if elapsed >= time.Second {
				t.Skipf("calls took %v, beyond one window: cannot tell refill from misconfiguration", elapsed)
			}
			refill := int(elapsed.Seconds()*perSecond) + 1
			if allowed < burst || allowed > burst+refill {
				t.Errorf("admitted %d of %d immediate requests in %v, want %d (+ at most %d refilled)",
					allowed, 3*burst, elapsed, burst, refill)
			}
		})
	}
}
