package storetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
)

// simPolicy refills one unit per second into a bucket of 1000, so that a
// peek reads the usage exactly: used reports it.
func simPolicy(a floodgate.Algorithm) floodgate.Policy {
	return floodgate.Policy{Name: "tokens", Algorithm: a, Quota: 1000, Window: 1000 * s}
}

// used reads what the bucket holds spent (its debt, in units) from a peek:
// the capacity less what remains, or, in debt, one unit less than the
// capacity plus the seconds until one unit is free.
func used(t *testing.T, l *floodgate.Limiter, key string) int64 {
	t.Helper()
	d, err := l.Take(context.Background(), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining > 0 {
		return 1000 - d.Remaining
	}
	if d.RetryAfter%s != 0 {
		t.Fatalf("peek in debt: RetryAfter %v is no whole number of seconds", d.RetryAfter)
	}
	return 999 + int64(d.RetryAfter/s)
}

// reservations is the seeded simulation of reserve-then-settle: 64
// clients of one key, random estimates and actual costs (larger and
// smaller, some cancelled).
func reservations(t *testing.T, newStore NewStore) {
	for _, a := range []floodgate.Algorithm{floodgate.TokenBucket, floodgate.GCRA} {
		t.Run(a.String()+"/Exact", func(t *testing.T) { reserveExact(t, newStore, a) })
	}
	t.Run("Bound/Serial", func(t *testing.T) { reserveBound(t, newStore, 1) })
	t.Run("Bound/Interleaved", func(t *testing.T) { reserveBound(t, newStore, 64) })
}

func simLimiter(t *testing.T, newStore NewStore, a floodgate.Algorithm, clock *Clock) *floodgate.Limiter {
	l, err := floodgate.NewLimiter(newStore(t, clock.Now), []floodgate.Policy{simPolicy(a)}, floodgate.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// reserveExact: 64 goroutines reserve and settle on one key at one
// instant (no refill); what the key holds spent is the sum of the actual
// costs of the admitted reservations, exactly.
func reserveExact(t *testing.T, newStore NewStore, a floodgate.Algorithm) {
	clock := NewClock(Epoch)
	l := simLimiter(t, newStore, a, clock)
	var sum, admitted atomic.Int64
	var wg sync.WaitGroup
	for c := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 97))
			for range 20 {
				est, act := 1+rng.Int64N(30), rng.Int64N(60)
				r, err := l.Reserve(context.Background(), "sim", floodgate.Cost{Requests: est})
				if err != nil {
					t.Error(err)
					return
				}
				if !r.Decision.Allowed {
					continue
				}
				admitted.Add(1)
				if rng.IntN(8) == 0 {
					err, act = r.Cancel(context.Background()), 0
				} else {
					_, err = r.Settle(context.Background(), floodgate.Cost{Requests: act})
				}
				if err != nil {
					t.Error(err)
					return
				}
				sum.Add(act)
			}
		}()
	}
	wg.Wait()
	if sum.Load() <= 1000 {
		t.Fatalf("the actual costs sum to %d: the simulation did not reach debt", sum.Load())
	}
	if got := used(t, l, "sim"); got != sum.Load() {
		t.Fatalf("%d reservations admitted: the key holds %d spent, the actual costs sum to %d", admitted.Load(), got, sum.Load())
	}
}

// reserveBound: seeded clients, at most outstanding reservations at once,
// take turns while the bucket refills. A reservation is admitted only
// when its estimate fits, and a key in debt admits nothing, so what the
// key holds spent never passes the quota by more than the overruns of the
// reservations outstanding at the last admission: with one at a time, by
// one request's overrun.
func reserveBound(t *testing.T, newStore NewStore, outstanding int) {
	clock := NewClock(Epoch)
	l := simLimiter(t, newStore, floodgate.TokenBucket, clock)
	rng := rand.New(rand.NewPCG(5, uint64(outstanding)))
	type held struct {
		r        *floodgate.Reservation
		est, act int64
	}
	open := map[int]held{}
	var bound, admitted, worst int64 // bound: the overruns of those outstanding at the last admission
	for range 1500 {
		clock.Advance(time.Duration(rng.Int64N(10)) * s) // whole seconds: whole units refilled
		c := rng.IntN(64)
		if len(open) == outstanding { // all taken: one of them settles
			for c = range open {
				break
			}
		}
		if h, ok := open[c]; ok {
			// One held past the settle time (10 minutes) stays at its
			// estimate: its overrun, counted in the bound, never comes.
			if _, err := h.r.Settle(context.Background(), floodgate.Cost{Requests: h.act}); err != nil && !errors.Is(err, floodgate.ErrReservationClosed) {
				t.Fatal(err)
			}
			delete(open, c)
		} else if len(open) < outstanding {
			est, act := 1+rng.Int64N(30), rng.Int64N(90)
			r, err := l.Reserve(context.Background(), "sim", floodgate.Cost{Requests: est})
			if err != nil {
				t.Fatal(err)
			}
			if r.Decision.Allowed {
				admitted++
				open[c] = held{r, est, act}
				bound = 0
				for _, h := range open {
					bound += max(h.act-h.est, 0)
				}
			} else if err := r.Cancel(context.Background()); !errors.Is(err, floodgate.ErrReservationClosed) {
				t.Fatalf("cancel of a refused reservation: %v", err)
			}
		}
		u := used(t, l, "sim")
		if u > 1000+bound {
			t.Fatalf("the key holds %d spent: beyond the quota 1000 + %d", u, bound)
		}
		worst = max(worst, u-1000)
	}
	if admitted < 100 || worst <= 0 {
		t.Fatalf("%d admitted, the key at most %d past its quota: the simulation did not reach debt", admitted, worst)
	}
}
