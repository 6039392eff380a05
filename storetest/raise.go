package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
)

// gcraRaise is the reported case: GCRA {Quota: 10, Window: 20 s, Burst:
// 15}, one request, then the same name with Quota 1000 a tenth of a second
// later. The state keeps the units spent (0.95 of the one unit is still
// owed at the old rate), so the raised policy admits, leaving 13; with the
// burst raised too, 999 are left.
func gcraRaise(t *testing.T, newStore NewStore) {
	clock := NewClock(Epoch)
	st := newStore(t, clock.Now)
	old := pol("api", floodgate.GCRA, 10, 20*s, 15)
	res := make([]floodgate.Result, 1)
	take := func(key string, cost int64, p floodgate.Policy) floodgate.Result {
		t.Helper()
		if err := st.Take(context.Background(), key, each(cost), []floodgate.Policy{p}, res); err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	take("a", 1, old)
	take("b", 1, old)
	clock.Advance(100 * ms)
	raised := old
	raised.Quota = 1000
	if r := take("a", 1, raised); !r.Allowed || r.Remaining != 13 {
		t.Errorf("quota raised: %+v, want admitted with 13 left", r)
	}
	raised.Burst = 1000
	if r := take("b", 0, raised); !r.Allowed || r.Remaining != 999 {
		t.Errorf("quota and burst raised: %+v, want 999 left", r)
	}
}

// raise plays the same random history on two keys under one policy, then
// asks about one more request under the policy on one key and under a
// raised copy (capacity at least as large, rate at least as high, under
// the same window or another) on the other: whatever the old policy
// admits, the raised one admits, leaving at least as much.
func raise(t *testing.T, newStore NewStore) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(a), 9))
			clock := NewClock(Epoch)
			st := newStore(t, clock.Now)
			res := make([]floodgate.Result, 1)
			take := func(key string, cost int64, p floodgate.Policy) floodgate.Result {
				t.Helper()
				if err := st.Take(context.Background(), key, each(cost), []floodgate.Policy{p}, res); err != nil {
					t.Fatal(err)
				}
				return res[0]
			}
			for trial := range 60 {
				q := 1 + rng.Int64N(20)
				old := pol("p", a, q, time.Duration(1+rng.Int64N(10))*s, 0)
				if a == floodgate.TokenBucket || a == floodgate.GCRA {
					old.Burst = 1 + rng.Int64N(2*q)
				}
				raised := raiseOf(rng, old)
				ka, kb := fmt.Sprintf("a%d", trial), fmt.Sprintf("b%d", trial)
				gap := old.Window / time.Duration(q)
				for range rng.IntN(20) {
					clock.Advance(time.Duration(rng.Int64N(int64(2 * gap))))
					cost := 1 + rng.Int64N(old.Capacity())
					take(ka, cost, old)
					take(kb, cost, old)
				}
				clock.Advance(time.Duration(rng.Int64N(int64(2 * gap))))
				cost := rng.Int64N(old.Capacity() + 1)
				ra, rb := take(ka, cost, old), take(kb, cost, raised)
				if ra.Allowed && (!rb.Allowed || rb.Remaining < ra.Remaining) || !ra.Allowed && !rb.Allowed && rb.Remaining < ra.Remaining {
					t.Fatalf("trial %d, %+v raised to %+v, cost %d: old %+v, raised %+v", trial, old, raised, cost, ra, rb)
				}
			}
		})
	}
}

// raiseOf returns a random raise of old: a capacity at least as large and
// a rate at least as high, under old's window half the time, else under
// one of 1 to 10 s (whole seconds, or any µs) of its own.
func raiseOf(rng *rand.Rand, old floodgate.Policy) floodgate.Policy {
	raised := old
	switch rng.IntN(4) {
	case 0:
		raised.Window = time.Duration(1+rng.Int64N(10)) * s
	case 1:
		raised.Window = time.Duration(1+rng.Int64N(10*int64(s/time.Microsecond))) * time.Microsecond
	}
	w0, w := old.Window.Microseconds(), raised.Window.Microseconds()
	raised.Quota = max(old.Quota, (old.Quota*w+w0-1)/w0) // the least raise: q·w/w0, rounded up
	if rng.IntN(3) > 0 {
		raised.Quota += rng.Int64N(5 * old.Quota)
	}
	if old.Burst > 0 {
		raised.Burst = old.Burst
		if rng.IntN(3) > 0 {
			raised.Burst += rng.Int64N(3 * old.Burst)
		}
	}
	return raised
}
