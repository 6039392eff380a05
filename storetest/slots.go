package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
)

// NewSlots returns an empty floodgate.Slots. Each call must give slots
// that share no state with earlier ones.
type NewSlots func(t *testing.T) floodgate.Slots

// RunSlots runs the in-flight slot suite: exact counts under concurrency,
// release (once, also on panic), keys and caps kept apart, and, when
// leases is true (a store shared across processes), a slot whose holder
// never releases it freeing itself once its lease ends.
func RunSlots(t *testing.T, newSlots NewSlots, leases bool) {
	t.Run("Exact", func(t *testing.T) { slotsExact(t, newSlots(t)) })
	t.Run("Release", func(t *testing.T) { slotsRelease(t, newSlots(t)) })
	t.Run("Panic", func(t *testing.T) { slotsPanic(t, newSlots(t)) })
	t.Run("Apart", func(t *testing.T) { slotsApart(t, newSlots(t)) })
	if leases {
		t.Run("Lease", func(t *testing.T) { slotsLease(t, newSlots(t)) })
	}
}

func acquire(t *testing.T, s floodgate.Slots, key string, c floodgate.Concurrency, lease time.Duration) (func(), int64, bool) {
	t.Helper()
	rel, free, ok, err := s.Acquire(context.Background(), key, c, lease)
	if err != nil {
		t.Fatal(err)
	}
	if ok != (rel != nil) {
		t.Fatalf("ok=%v with release %v: a release comes exactly with a slot", ok, rel != nil)
	}
	return rel, free, ok
}

// slotsExact: 4 × Max callers at once get exactly Max slots.
func slotsExact(t *testing.T, s floodgate.Slots) {
	c := floodgate.Concurrency{Name: "inflight", Max: 5}
	var got atomic.Int64
	var mu sync.Mutex
	var held []func()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 4 * c.Max {
		wg.Go(func() {
			<-start
			rel, _, ok, err := s.Acquire(context.Background(), "hot", c, time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				got.Add(1)
				mu.Lock()
				held = append(held, rel)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if got.Load() != c.Max {
		t.Fatalf("%d slots held at once, want exactly %d", got.Load(), c.Max)
	}
	for _, rel := range held {
		rel()
	}
	rel, free, ok := acquire(t, s, "hot", c, time.Minute)
	if !ok || free != c.Max-1 {
		t.Fatalf("after every release: ok=%v free=%d, want true %d", ok, free, c.Max-1)
	}
	rel()
}

// slotsRelease: free counts down, a release gives one slot back, and a
// second call of the same release gives back nothing more.
func slotsRelease(t *testing.T, s floodgate.Slots) {
	c := floodgate.Concurrency{Name: "two", Max: 2}
	r1, free, ok := acquire(t, s, "k", c, time.Minute)
	if !ok || free != 1 {
		t.Fatalf("first: ok=%v free=%d, want true 1", ok, free)
	}
	r2, free, ok := acquire(t, s, "k", c, time.Minute)
	if !ok || free != 0 {
		t.Fatalf("second: ok=%v free=%d, want true 0", ok, free)
	}
	if _, _, ok := acquire(t, s, "k", c, time.Minute); ok {
		t.Fatal("third slot of two granted")
	}
	r1()
	r1() // must not free r2's slot
	r3, free, ok := acquire(t, s, "k", c, time.Minute)
	if !ok || free != 0 {
		t.Fatalf("after one release: ok=%v free=%d, want true 0", ok, free)
	}
	if _, _, ok := acquire(t, s, "k", c, time.Minute); ok {
		t.Fatal("a repeated release freed a second slot")
	}
	r2()
	r3()
}

// slotsPanic: a holder that panics and releases in a deferred call (as
// every door does) gives its slot back.
func slotsPanic(t *testing.T, s floodgate.Slots) {
	c := floodgate.Concurrency{Name: "one", Max: 1}
	func() {
		defer func() { _ = recover() }()
		rel, _, ok := acquire(t, s, "k", c, time.Minute)
		if !ok {
			t.Fatal("no slot")
		}
		defer rel()
		panic("handler failed")
	}()
	rel, _, ok := acquire(t, s, "k", c, time.Minute)
	if !ok {
		t.Fatal("slot still held after its holder panicked")
	}
	rel()
}

// slotsApart: keys and caps of other names do not share slots.
func slotsApart(t *testing.T, s floodgate.Slots) {
	a := floodgate.Concurrency{Name: "a", Max: 1}
	b := floodgate.Concurrency{Name: "b", Max: 1}
	var rels []func()
	for _, try := range []struct {
		key string
		c   floodgate.Concurrency
	}{{"k1", a}, {"k2", a}, {"k1", b}} {
		rel, _, ok := acquire(t, s, try.key, try.c, time.Minute)
		if !ok {
			t.Fatalf("%s/%s refused: it shares no slot with the others", try.key, try.c.Name)
		}
		rels = append(rels, rel)
	}
	for _, rel := range rels {
		rel()
	}
}

// slotsLease: a slot never released frees itself when its lease ends. The
// bound is generous: only the count is asserted, not the speed.
func slotsLease(t *testing.T, s floodgate.Slots) {
	c := floodgate.Concurrency{Name: "leased", Max: 1}
	const lease = 200 * time.Millisecond
	if _, _, ok := acquire(t, s, "k", c, lease); !ok {
		t.Fatal("no slot")
	}
	if _, _, ok := acquire(t, s, "k", c, time.Minute); ok {
		t.Fatal("second slot of one granted while the first lease holds")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		time.Sleep(lease / 2)
		rel, _, ok := acquire(t, s, "k", c, time.Minute)
		if ok {
			rel()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot still held 30 s after a %v lease", lease)
		}
	}
}
