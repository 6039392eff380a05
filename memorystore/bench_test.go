package memorystore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
)

// benchKeys is the key count of the many-keys benchmarks.
const benchKeys = 100_000

// benchPolicy is the policy every benchmark uses: 100 units per second,
// with a burst of 100 for the bucket algorithms (the window algorithms
// reject a Burst).
func benchPolicy(a floodgate.Algorithm) floodgate.Policy {
	p := floodgate.Policy{Name: "api", Algorithm: a, Quota: 100, Window: time.Second}
	if a == floodgate.TokenBucket || a == floodgate.GCRA {
		p.Burst = 100
	}
	return p
}

var benchAlgorithms = floodgate.Algorithms()

// makeKeys returns n keys of the form "user:<n>", built before the timer
// starts so that formatting is not measured.
func makeKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	return keys
}

// newBenchStore returns a store holding every key in keys (each taken once),
// closed when the benchmark ends.
func newBenchStore(b *testing.B, policies []floodgate.Policy, keys []string) *memorystore.Store {
	st := testkit.Memory(b)
	results := make([]floodgate.Result, len(policies))
	for _, k := range keys {
		if err := st.Take(context.Background(), k, one, policies, results); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

// BenchmarkTake measures Store.Take with a preallocated results slice, the
// hot-path API, per algorithm: one hot key and 100,000 keys, serial and
// parallel. The hot key is denied on nearly every call once its burst is
// spent (100 per second), so it measures the common overloaded case.
func BenchmarkTake(b *testing.B) {
	ctx := context.Background()
	keys := makeKeys(benchKeys)
	for _, a := range benchAlgorithms {
		policies := []floodgate.Policy{benchPolicy(a)}
		b.Run(a.String()+"/hotkey", func(b *testing.B) {
			st := newBenchStore(b, policies, keys[:1])
			results := make([]floodgate.Result, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := st.Take(ctx, "user:0", one, policies, results); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(a.String()+"/hotkey-parallel", func(b *testing.B) {
			st := newBenchStore(b, policies, keys[:1])
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				results := make([]floodgate.Result, 1)
				for pb.Next() {
					if err := st.Take(ctx, "user:0", one, policies, results); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run(a.String()+"/100k-keys", func(b *testing.B) {
			st := newBenchStore(b, policies, keys)
			results := make([]floodgate.Result, 1)
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for range b.N {
				if err := st.Take(ctx, keys[i], one, policies, results); err != nil {
					b.Fatal(err)
				}
				if i++; i == len(keys) {
					i = 0
				}
			}
		})
		b.Run(a.String()+"/100k-keys-parallel", func(b *testing.B) {
			st := newBenchStore(b, policies, keys)
			var worker atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				results := make([]floodgate.Result, 1)
				// Each worker starts at a different place in the key list,
				// so workers rarely hit the same key at once.
				i := int(worker.Add(1)*7919) % len(keys)
				for pb.Next() {
					if err := st.Take(ctx, keys[i], one, policies, results); err != nil {
						b.Error(err)
						return
					}
					if i++; i == len(keys) {
						i = 0
					}
				}
			})
		})
	}
}
