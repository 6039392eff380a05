package memorystore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) floodgate.Store {
		st := testkit.Memory(t, memorystore.WithClock(now))
		return st
	})
}

// TestSlotsConformance: one process needs no leases; release always runs.
func TestSlotsConformance(t *testing.T) {
	storetest.RunSlots(t, func(t *testing.T) floodgate.Slots {
		st := testkit.Memory(t)
		return st
	}, false)
}

// TestPanicUnlocks: a policy that was never validated can make an
// algorithm panic (here by dividing by a zero window); net/http recovers
// such panics, so neither the shard's lock (a new key) nor the key's own
// (a held key) may stay locked.
func TestPanicUnlocks(t *testing.T) {
	s := testkit.Memory(t, memorystore.WithSweepInterval(0))
	ctx := context.Background()
	res := make([]floodgate.Result, 1)
	good := []floodgate.Policy{{Name: "p", Algorithm: floodgate.FixedWindow, Quota: 5, Window: time.Second}}
	bad := []floodgate.Policy{{Name: "p", Algorithm: floodgate.FixedWindow, Quota: 1}}
	if err := s.Take(ctx, "held", one, good, res); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"new", "held"} {
		panicked := func() (p any) {
			defer func() { p = recover() }()
			s.Take(ctx, key, one, bad, res)
			return nil
		}()
		if panicked == nil {
			t.Fatalf("%s key: a zero window did not panic; this test no longer tests anything", key)
		}
		done := make(chan error, 1)
		go func() { done <- s.Take(ctx, key, one, good, res) }()
		select {
		case err := <-done:
			if err != nil || !res[0].Allowed {
				t.Fatalf("%s key, after the panic: %+v, %v", key, res[0], err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s key: stayed locked after a panic", key)
		}
	}
}

// steppedStore returns a store of the given number of shards, without a
// sweeper, whose clock stands at fixedClock plus the µs in clock.
func steppedStore(t *testing.T, shards int) (*memorystore.Store, *atomic.Int64) {
	clock := new(atomic.Int64)
	now := func() time.Time { return fixedClock().Add(time.Duration(clock.Load()) * time.Microsecond) }
	st := testkit.Memory(t, memorystore.WithClock(now), memorystore.WithShards(shards), memorystore.WithSweepInterval(0))
	return st, clock
}

// sweepWhile runs Sweep without pause until the returned func is called,
// which waits for the sweeping to end.
func sweepWhile(st *memorystore.Store) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
				st.Sweep()
			}
		}
	}()
	return func() { close(quit); <-done }
}

// TestNoLostDecisions: decisions for held keys take no shard lock, so they
// race the table's changes: growth, and removals by Sweep and Reset, which
// shift entries within the table. None of that may lose or split a key's
// state: each hot key admits exactly its quota while churn keys come and go
// in the same (single) shard.
func TestNoLostDecisions(t *testing.T) {
	st, clock := steppedStore(t, 1)
	ctx := context.Background()
	const quota, hotKeys, workers, tries = 500, 8, 8, 2000
	hot := []floodgate.Policy{{Name: "hot", Algorithm: floodgate.FixedWindow, Quota: quota, Window: time.Hour}}
	churn := []floodgate.Policy{{Name: "churn", Algorithm: floodgate.GCRA, Quota: 1, Window: time.Millisecond}}

	var admitted [hotKeys]atomic.Int64
	var wg, churners sync.WaitGroup
	stop := make(chan struct{})
	defer sweepWhile(st)()
	churners.Add(1)
	go func() { // new keys: growth; Reset and an advancing clock: removals
		defer churners.Done()
		res := make([]floodgate.Result, 1)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := "churn:" + strconv.Itoa(i)
			if err := st.Take(ctx, k, one, churn, res); err != nil {
				t.Error(err)
				return
			}
			if i%3 == 0 {
				st.Reset(ctx, k, churn)
			}
			clock.Add(100)
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := make([]floodgate.Result, 1)
			for i := range tries * hotKeys {
				k := (i + w) % hotKeys
				if err := st.Take(ctx, "hot:"+strconv.Itoa(k), one, hot, res); err != nil {
					t.Error(err)
					return
				}
				if res[0].Allowed {
					admitted[k].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	churners.Wait()
	for k := range admitted {
		if got := admitted[k].Load(); got != quota {
			t.Errorf("hot:%d admitted %d of %d tries, want exactly %d", k, got, workers*tries, quota)
		}
	}
}

// TestSweepRace: a decision that finds a key's entry just as Sweep removes
// it (its state expired) must not charge the removed entry, where the
// charge would be lost and the next request admitted again. Each round
// starts a new window and lets several goroutines race for a quota of one
// while Sweep runs without pause.
func TestSweepRace(t *testing.T) {
	st, clock := steppedStore(t, 1)
	ctx := context.Background()
	onePolicy := []floodgate.Policy{{Name: "one", Algorithm: floodgate.FixedWindow, Quota: 1, Window: time.Second}}
	defer sweepWhile(st)()
	rounds := 3000
	if testing.Short() || raceEnabled() {
		rounds = 500
	}
	for round := range rounds {
		clock.Add(2_000_000) // a new window: the key's state has expired
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := make([]floodgate.Result, 1)
				for range 4 {
					if err := st.Take(ctx, "k", one, onePolicy, res); err != nil {
						t.Error(err)
						return
					}
					if res[0].Allowed {
						admitted.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if n := admitted.Load(); n != 1 {
			t.Fatalf("round %d: %d requests admitted under a quota of 1", round, n)
		}
	}
}

// TestSweepDropsAll: Sweep drops every expired key and keeps every live one,
// removals shifting entries under its scan included.
func TestSweepDropsAll(t *testing.T) {
	st, clock := steppedStore(t, 2)
	ctx := context.Background()
	short := []floodgate.Policy{{Name: "short", Algorithm: floodgate.FixedWindow, Quota: 1, Window: time.Second}}
	long := []floodgate.Policy{{Name: "long", Algorithm: floodgate.FixedWindow, Quota: 1, Window: time.Hour}}
	res := make([]floodgate.Result, 1)
	for i := range 5000 {
		p := short
		if i%7 == 0 {
			p = long
		}
		if err := st.Take(ctx, "k"+strconv.Itoa(i), one, p, res); err != nil {
			t.Fatal(err)
		}
	}
	clock.Add(2_000_000) // the short windows have ended, the long ones not
	st.Sweep()
	if n, want := st.Len(), (5000+6)/7; n != want {
		t.Fatalf("Len() = %d after Sweep, want %d (the live keys)", n, want)
	}
	for i := 0; i < 5000; i += 7 { // still held: spent, so denied
		if st.Take(ctx, "k"+strconv.Itoa(i), one, long, res); res[0].Allowed {
			t.Fatalf("k%d was admitted again: Sweep dropped a live key", i)
		}
	}
}

// TestUnnamedPolicy: the store does not validate policies (the Limiter
// does), and a policy without a name is still a policy.
func TestUnnamedPolicy(t *testing.T) {
	st := testkit.Memory(t, memorystore.WithSweepInterval(0))
	ctx := context.Background()
	res := make([]floodgate.Result, 2)
	onePolicy := []floodgate.Policy{{Algorithm: floodgate.FixedWindow, Quota: 1, Window: time.Hour}}
	two := append(onePolicy, floodgate.Policy{Name: "b", Algorithm: floodgate.FixedWindow, Quota: 5, Window: time.Hour})
	for _, ps := range [][]floodgate.Policy{onePolicy, two} {
		key := "k" + strconv.Itoa(len(ps))
		for i, want := range []bool{true, false, false} {
			if err := st.Take(ctx, key, one, ps, res); err != nil || res[0].Allowed != want {
				t.Fatalf("%d policies, take %d: allowed %v, %v; want %v", len(ps), i+1, res[0].Allowed, err, want)
			}
		}
	}
}

// TestChargedNothingKeepsNoKey: a request that charges only a unit the
// key's policies do not count (a GET against a content-bytes policy)
// stores nothing, and a later request that does count is decided as for a
// new key (it once found an entry without a state and crashed).
func TestChargedNothingKeepsNoKey(t *testing.T) {
	st := testkit.Memory(t)
	ps := []floodgate.Policy{{Name: "bytes", Algorithm: floodgate.FixedWindow, Quota: 10, Window: time.Hour, Unit: floodgate.ContentBytes}}
	res := make([]floodgate.Result, 1)
	ctx := context.Background()
	if err := st.Take(ctx, "k", floodgate.Cost{Requests: 1}, ps, res); err != nil || !res[0].Allowed {
		t.Fatalf("bodiless request: %+v %v", res[0], err)
	}
	if n := st.Len(); n != 0 {
		t.Fatalf("%d keys held after a request that spent nothing, want 0", n)
	}
	if err := st.Take(ctx, "k", floodgate.Cost{ContentBytes: 4}, ps, res); err != nil || !res[0].Allowed || res[0].Remaining != 6 {
		t.Fatalf("4 bytes after it: %+v %v, want 6 left", res[0], err)
	}
}

// TestNewRefuses: every option out of range, and a nil one, is an error
// wrapping floodgate.ErrInvalidOption that names it; no store is returned.
func TestNewRefuses(t *testing.T) {
	for _, c := range []struct {
		opt  memorystore.Option
		want string
	}{
		{nil, "memorystore: nil option"},
		{memorystore.WithMaxKeys(0), "max keys must be at least 1, got 0"},
		{memorystore.WithMaxKeys(-5), "max keys must be at least 1, got -5"},
		{memorystore.WithShards(0), "shards must be from 1 to 65536, got 0"},
		{memorystore.WithShards(1<<16 + 1), "shards must be from 1 to 65536, got 65537"},
		{memorystore.WithClock(nil), "memorystore: nil clock"},
	} {
		// The bad option after a good one and before another: order does not hide it.
		s, err := memorystore.New(memorystore.WithMaxKeys(10), c.opt, memorystore.WithSweepInterval(0))
		if s != nil || !errors.Is(err, floodgate.ErrInvalidOption) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(…, %s, …) = %v, %v; want ErrInvalidOption saying %q", c.want, s, err, c.want)
		}
	}
	s, err := memorystore.New(memorystore.WithShards(1<<16), memorystore.WithMaxKeys(1), memorystore.WithSweepInterval(-1))
	if err != nil {
		t.Fatalf("the bounds themselves: %v", err)
	}
	s.Close()
}
