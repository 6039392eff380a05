package memorystore_test

import (
	"context"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
)

// maxBytesPerKey is the memory budget of one live key under one GCRA or
// token bucket policy.
const maxBytesPerKey = 150

// raceEnabled reports whether the test binary was built with -race, whose
// shadow memory and slowdown make a million-key test pointless.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// fixedClock keeps every key within its window for the whole test, so that
// all keys are live and none may be dropped as expired.
func fixedClock() time.Time { return time.Unix(1_700_000_000, 0) }

// fill takes cost 1 for keys "user:0" … "user:<n-1>". Keys are formatted
// into a reused buffer; the store keeps its own copy of each new key.
func fill(tb testing.TB, st *memorystore.Store, policies []floodgate.Policy, n int) {
	tb.Helper()
	results := make([]floodgate.Result, len(policies))
	buf := []byte("user:")
	for i := range n {
		buf = strconv.AppendInt(buf[:5], int64(i), 10)
		if err := st.Take(context.Background(), string(buf), one, policies, results); err != nil {
			tb.Fatal(err)
		}
		if !results[0].Allowed {
			tb.Fatalf("key %d: first take denied", i)
		}
	}
}

// heapAlloc returns the live heap after a full collection.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// bytesPerKey fills a fresh store with n live keys under policy and returns
// the heap growth per key, store included, and the store.
func bytesPerKey(tb testing.TB, policy floodgate.Policy, n int) (float64, *memorystore.Store) {
	policies := []floodgate.Policy{policy}
	before := heapAlloc()
	// MaxKeys is well above n: this measures the cost of keys, not eviction.
	st := testkit.Memory(tb, memorystore.WithClock(fixedClock), memorystore.WithSweepInterval(0),
		memorystore.WithMaxKeys(4*n))
	fill(tb, st, policies, n)
	after := heapAlloc()
	runtime.KeepAlive(st)
	return float64(int64(after)-int64(before)) / float64(n), st
}

// TestMemoryPerKey checks that a million live keys under one GCRA or token
// bucket policy cost at most maxBytesPerKey each. It is skipped with -short
// and -race, where it would be slow and, under -race, meaningless.
func TestMemoryPerKey(t *testing.T) {
	if testing.Short() || raceEnabled() {
		t.Skip("million-key memory test: skipped with -short and -race")
	}
	const keys = 1_000_000
	for _, a := range []floodgate.Algorithm{floodgate.GCRA, floodgate.TokenBucket} {
		t.Run(a.String(), func(t *testing.T) {
			perKey, st := bytesPerKey(t, benchPolicy(a), keys)
			if n := st.Len(); n != keys {
				t.Errorf("Len() = %d after %d distinct keys, want %d", n, keys, keys)
			}
			if e := st.Evictions(); e != 0 {
				t.Errorf("Evictions() = %d with MaxKeys above the key count, want 0", e)
			}
			t.Logf("%d live keys: %.1f bytes/key", keys, perKey)
			if perKey > maxBytesPerKey {
				t.Errorf("%.1f bytes per live key, want at most %d", perKey, maxBytesPerKey)
			}
		})
	}
}

// TestMaxKeys checks that MaxKeys bounds the store when more live keys
// arrive than it may hold, and that every live key evicted is counted.
// -short and -race use fewer keys.
func TestMaxKeys(t *testing.T) {
	keys, maxKeys := 300_000, 100_000
	if testing.Short() || raceEnabled() {
		keys, maxKeys = 50_000, 5_000
	}
	for _, a := range []floodgate.Algorithm{floodgate.GCRA, floodgate.TokenBucket} {
		t.Run(a.String(), func(t *testing.T) {
			st := testkit.Memory(t, memorystore.WithClock(fixedClock), memorystore.WithSweepInterval(0),
				memorystore.WithMaxKeys(maxKeys))
			defer st.Close()
			fill(t, st, []floodgate.Policy{benchPolicy(a)}, keys)
			n := st.Len()
			if n > maxKeys {
				t.Errorf("Len() = %d after %d keys, want at most MaxKeys = %d", n, keys, maxKeys)
			}
			if n < maxKeys*9/10 {
				t.Errorf("Len() = %d after %d keys, want close to MaxKeys = %d", n, keys, maxKeys)
			}
			// The clock stands still, so every key is live: each one not
			// held was evicted live and must be counted.
			if e := st.Evictions(); e != uint64(keys-n) {
				t.Errorf("Evictions() = %d, want %d (keys taken − keys held)", e, keys-n)
			}
		})
	}
}

// TestMaxKeysSmall: with a small MaxKeys the store has fewer shards, so
// the bound holds closely (a new key into an empty shard cannot evict, so it
// may be passed by at most the number of shards, MaxKeys/64 or fewer).
func TestMaxKeysSmall(t *testing.T) {
	for _, maxKeys := range []int{1, 10, 100, 1000} {
		st := testkit.Memory(t, memorystore.WithClock(fixedClock), memorystore.WithSweepInterval(0), memorystore.WithMaxKeys(maxKeys))
		fill(t, st, []floodgate.Policy{benchPolicy(floodgate.GCRA)}, 20*maxKeys+300)
		if n, limit := st.Len(), maxKeys+maxKeys/64; n > limit || n < maxKeys {
			t.Errorf("MaxKeys %d: Len() = %d after %d keys, want %d..%d", maxKeys, n, 20*maxKeys+300, maxKeys, limit)
		}
		st.Close()
	}
}

// BenchmarkMemory reports the heap cost of one million live keys under one
// policy, in bytes/key (HeapAlloc growth after runtime.GC, divided by the
// key count). Each iteration builds a fresh store.
func BenchmarkMemory(b *testing.B) {
	const keys = 1_000_000
	for _, a := range []floodgate.Algorithm{floodgate.GCRA, floodgate.TokenBucket} {
		b.Run(a.String()+"/1M-keys", func(b *testing.B) {
			var perKey float64
			for range b.N {
				var st *memorystore.Store
				perKey, st = bytesPerKey(b, benchPolicy(a), keys)
				st.Close()
			}
			b.ReportMetric(perKey, "bytes/key")
		})
	}
}
