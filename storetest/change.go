package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algorithm"
)

// windowRaise is a raise that changes the window (algorithm.TestWindowChange):
// {Quota 10, Window 20 s} spends all 10 at 5 s; at 15 s the same name asks
// for one unit as {10 per 10 s} (twice the rate) or {30 per 40 s}. Each
// raise has a key of its own, spent alike.
func windowRaise(t *testing.T, newStore NewStore) {
	const us = time.Microsecond
	type answer struct {
		allowed                bool
		remaining              int64
		resetAfter, wait, full time.Duration
	}
	for _, c := range []struct {
		a        floodgate.Algorithm
		old      answer
		ten, fty answer // under {10, 10 s} and {30, 40 s}
	}{
		// The window restarts.
		{floodgate.FixedWindow, answer{false, 0, 5 * s, 5 * s, 0}, answer{true, 9, 5 * s, 0, 0}, answer{true, 29, 25 * s, 0, 0}},
		// The 10 leave at 25 s, as the old window lets them; under 10 s
		// they left at 15 s already.
		{floodgate.SlidingWindowLog, answer{false, 0, 10 * s, 10 * s, 0}, answer{true, 9, 10 * s, 0, 0}, answer{true, 19, 10 * s, 0, 0}},
		// The estimate's 10 count in the new window: one unit fits at 21 s
		// under 10 s; under 40 s a 20th once the 11 weigh 10, at 40 s + 40/11 s.
		// The quota is all free at the end of the window after theirs.
		{floodgate.SlidingWindowCounter, answer{false, 0, 7 * s, 7 * s, 25 * s}, answer{false, 0, 6 * s, 6 * s, 15 * s},
			answer{true, 19, 28_636_364 * us, 0, 65 * s}},
		// The token bucket refills the 10 s since the request at the new
		// rate; GCRA's TAT owed 5 at the change. The next unit: its missing
		// fraction at the new rate (0.5/0.75 s, 1/0.75 s, rounded up).
		{floodgate.TokenBucket, answer{true, 4, 2 * s, 0, 0}, answer{true, 9, s, 0, 0}, answer{true, 26, 666_667 * us, 0, 0}},
		{floodgate.GCRA, answer{true, 4, 2 * s, 0, 0}, answer{true, 4, s, 0, 0}, answer{true, 24, 1_333_334 * us, 0, 0}},
		// The key's window, opened at 5 s, ends at 25 s; under another
		// length it has ended, and the request opens one at 15 s.
		{floodgate.AnchoredWindow, answer{false, 0, 10 * s, 10 * s, 0}, answer{true, 9, 10 * s, 0, 0}, answer{true, 29, 40 * s, 0, 0}},
	} {
		t.Run(c.a.String(), func(t *testing.T) {
			clock := NewClock(Epoch)
			st := newStore(t, clock.Now)
			old := pol("api", c.a, 10, 20*s, 0)
			res := make([]floodgate.Result, 1)
			for _, v := range []struct {
				p    floodgate.Policy
				want answer
			}{{old, c.old}, {pol("api", c.a, 10, 10*s, 0), c.ten}, {pol("api", c.a, 30, 40*s, 0), c.fty}} {
				clock.Set(Epoch.Add(5 * s))
				key := v.p.Window.String()
				if err := st.Take(context.Background(), key, each(10), []floodgate.Policy{old}, res); err != nil || !res[0].Allowed {
					t.Fatalf("spending the quota: %v %+v", err, res[0])
				}
				clock.Set(Epoch.Add(15 * s))
				if err := st.Take(context.Background(), key, each(1), []floodgate.Policy{v.p}, res); err != nil {
					t.Fatal(err)
				}
				r := res[0]
				if got := (answer{r.Allowed, r.Remaining, r.ResetAfter, r.RetryAfter, r.FullAfter}); got != v.want {
					t.Errorf("as %d per %v: %+v, want %+v", v.p.Quota, v.p.Window, got, v.want)
				}
			}
		})
	}
}

// policyChanges plays random histories through the store and through
// package algorithm side by side, raising the policy (its window too) once
// or twice along the way: every answer must be the algorithm's, to the µs.
// Half the policies are near the 2^53 bound of capacity × window, where a
// rescaled debt's product passes it by far.
func policyChanges(t *testing.T, newStore NewStore) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(a), 31))
			clock := NewClock(Epoch)
			st := newStore(t, clock.Now)
			res := make([]floodgate.Result, 1)
			for trial := range 40 {
				p := randomPolicy(rng, a, trial%2 == 0)
				ref := &reference{a: a}
				key := fmt.Sprintf("c%d", trial)
				for step := range 40 {
					if step == 15 || step == 30 && rng.IntN(2) == 0 {
						p = validRaise(rng, p)
					}
					clock.Advance(time.Duration(rng.Int64N(int64(2*p.Window)/p.Quota+1)) + time.Microsecond)
					cost := rng.Int64N(p.Capacity() + 1)
					if err := st.Take(context.Background(), key, each(cost), []floodgate.Policy{p}, res); err != nil {
						t.Fatal(err)
					}
					want := ref.take(clock.Now().UnixMicro(), p, cost)
					got := res[0]
					got.Policy = floodgate.Policy{}
					if got != want {
						t.Fatalf("trial %d step %d, %+v, cost %d:\n got  %+v\n want %+v", trial, step, p, cost, got, want)
					}
				}
			}
		})
	}
}

// validRaise returns the first of ten raises of p that is a valid policy
// (capacity × window within 2^53), or p.
func validRaise(rng *rand.Rand, p floodgate.Policy) floodgate.Policy {
	for range 10 {
		if raised := raiseOf(rng, p); raised.Validate() == nil {
			return raised
		}
	}
	return p
}

// randomPolicy returns a policy of algorithm a with a window of 1 µs to
// 10 s; huge: a capacity within a factor 4 of the 2^53 bound, else a
// quota of at most 1,000.
func randomPolicy(rng *rand.Rand, a floodgate.Algorithm, huge bool) floodgate.Policy {
	w := 1000 + rng.Int64N(10_000_000)
	most := min(int64(1000), (1<<53)/w/2)
	if huge {
		most = (1 << 53) / w / 2
	}
	p := pol("p", a, max(most/2+rng.Int64N(most/2+1), 1), time.Duration(w)*time.Microsecond, 0)
	if !huge {
		p.Quota = 1 + rng.Int64N(most)
	}
	if a == floodgate.TokenBucket || a == floodgate.GCRA {
		p.Burst = 1 + rng.Int64N(min(2*p.Quota, (1<<53)/w/2))
	}
	return p
}

// logBeyondEpoch: a log whose window grows by more than the time since
// the epoch moves its entries back only to the epoch's first µs, in every
// store as in package algorithm (a negative score would read as the log's
// total in Redis).
func logBeyondEpoch(t *testing.T, newStore NewStore) {
	clock := NewClock(Epoch)
	st := newStore(t, clock.Now)
	ref := &reference{a: floodgate.SlidingWindowLog}
	res := make([]floodgate.Result, 1)
	old := pol("log", floodgate.SlidingWindowLog, 3, s, 0)
	long := pol("log", floodgate.SlidingWindowLog, 3, 100*365*24*time.Hour, 0)
	for i, p := range []floodgate.Policy{old, old, long, long} {
		if err := st.Take(context.Background(), "k", each(1), []floodgate.Policy{p}, res); err != nil {
			t.Fatal(err)
		}
		want := ref.take(clock.Now().UnixMicro(), p, 1)
		if got := res[0]; got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.ResetAfter != want.ResetAfter || got.RetryAfter != want.RetryAfter {
			t.Fatalf("request %d under %v: %+v, want %+v", i, p.Window, got, want)
		}
		clock.Advance(ms)
	}
	if r := res[0]; r.Allowed || r.Remaining != 0 {
		t.Fatalf("fourth request: %+v, want refused: the three before are held", r)
	}
}

// reference is one key's state under package algorithm, kept as the
// memory store keeps it: forgotten once it expires.
type reference struct {
	a   floodgate.Algorithm
	s   algorithm.State
	log algorithm.Log
	exp int64
}

func (ref *reference) take(now int64, p floodgate.Policy, cost int64) floodgate.Result {
	if ref.exp <= now {
		ref.s, ref.log = algorithm.State{}, algorithm.Log{}
	}
	ap := algorithm.Params{Quota: p.Quota, Capacity: p.Capacity(), Window: p.Window.Microseconds()}
	var r algorithm.Result
	switch ref.a {
	case floodgate.FixedWindow:
		algorithm.FixedWindow(&ref.s, now, ap, cost, &r)
	case floodgate.SlidingWindowCounter:
		algorithm.SlidingWindowCounter(&ref.s, now, ap, cost, &r)
	case floodgate.TokenBucket:
		algorithm.TokenBucket(&ref.s, now, ap, cost, &r)
	case floodgate.GCRA:
		algorithm.GCRA(&ref.s, now, ap, cost, &r)
	case floodgate.AnchoredWindow:
		algorithm.AnchoredWindow(&ref.s, now, ap, cost, &r)
	case floodgate.SlidingWindowLog:
		if r = ref.log.Take(now, ap, cost); r.Allowed && cost > 0 {
			ref.log.Add(now, ap, cost)
		}
	default: // no algorithm runs as another, here either
		panic(fmt.Sprintf("storetest: no reference decision for algorithm %v", ref.a))
	}
	if r.Allowed && cost > 0 {
		ref.exp = r.Expires
	}
	us := time.Microsecond
	return floodgate.Result{Allowed: r.Allowed, Remaining: r.Remaining, ResetAfter: time.Duration(r.ResetAfter) * us,
		RetryAfter: time.Duration(r.RetryAfter) * us, FullAfter: time.Duration(r.Full) * us}
}
