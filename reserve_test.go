package floodgate_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/storetest"
)

// TestReserveSettle: exact standings through reserve, settle above and
// below the estimate, cancel, debt and the settle time, on a fixed
// window of 10 per hour.
func TestReserveSettle(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Epoch)
	p := floodgate.Policy{Name: "tokens", Algorithm: floodgate.FixedWindow, Quota: 10, Window: time.Hour}
	l, err := floodgate.NewLimiter(newMemory(t, clock.Now), []floodgate.Policy{p}, floodgate.WithClock(clock), floodgate.WithSettleWithin(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	reserve := func(est int64) *floodgate.Reservation {
		t.Helper()
		r, err := l.Reserve(ctx, "k", floodgate.Cost{Requests: est})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	settle := func(r *floodgate.Reservation, act, remaining int64) {
		t.Helper()
		d, err := r.Settle(ctx, floodgate.Cost{Requests: act})
		if err != nil || !d.Allowed || d.Remaining != remaining {
			t.Fatalf("settle %d: %+v, %v; want %d remaining", act, d, err, remaining)
		}
	}
	r := reserve(4)
	if !r.Decision.Allowed || r.Decision.Remaining != 6 {
		t.Fatalf("reserve 4: %+v", r.Decision)
	}
	settle(r, 7, 3) // 3 more than estimated: posted
	if _, err := r.Settle(ctx, floodgate.Cost{Requests: 1}); !errors.Is(err, floodgate.ErrReservationClosed) {
		t.Fatalf("second settle: %v", err)
	}
	settle(reserve(2), 1, 2) // 1 given back
	r = reserve(2)
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	// Past the settle time the estimate stays: 2 of the 2 left.
	r = reserve(2)
	clock.Advance(time.Minute + time.Microsecond)
	if err := r.Cancel(ctx); !errors.Is(err, floodgate.ErrReservationClosed) {
		t.Fatalf("cancel after the settle time: %v", err)
	}
	// In debt: 5 estimated, 25 spent; nothing passes until the window's end.
	clock.Set(storetest.Epoch.Add(time.Hour))
	settle(reserve(5), 25, 0)
	clock.Advance(10 * time.Minute)
	r = reserve(1)
	if d := r.Decision; d.Allowed || d.Remaining != 0 || d.RetryAfter != 50*time.Minute || d.ResetAfter != 50*time.Minute {
		t.Fatalf("in debt: %+v, want refused, 0 left, retry and reset at the window's end (50m)", d)
	}
	if err := r.Cancel(ctx); !errors.Is(err, floodgate.ErrReservationClosed) {
		t.Fatalf("cancel of a refused reservation: %v", err)
	}
	if _, err := l.Reserve(ctx, "k", floodgate.Cost{Requests: 1, Kind: floodgate.Post}); !errors.Is(err, floodgate.ErrInvalidCost) {
		t.Fatalf("reserve of a post-charge: %v", err)
	}
	if _, err := reserve(0).Settle(ctx, floodgate.Cost{Requests: -1}); !errors.Is(err, floodgate.ErrInvalidCost) {
		t.Fatalf("negative actual: %v", err)
	}
}

// countingStore counts the Takes that reach the store.
type countingStore struct {
	floodgate.Store
	calls atomic.Int64
}

func (s *countingStore) Take(ctx context.Context, key string, cost floodgate.Cost, policies []floodgate.Policy, results []floodgate.Result) error {
	s.calls.Add(1)
	return s.Store.Take(ctx, key, cost, policies, results)
}

// TestSettleCalls: a reservation takes one store call, and its settlement
// one more, none when the actual cost is the estimate (docs/USAGE.md).
func TestSettleCalls(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Epoch)
	s := &countingStore{Store: newMemory(t, clock.Now)}
	p := floodgate.Policy{Name: "tokens", Algorithm: floodgate.FixedWindow, Quota: 10, Window: time.Hour}
	l, err := floodgate.NewLimiter(s, []floodgate.Policy{p}, floodgate.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ est, act, calls int64 }{{3, 3, 1}, {3, 5, 2}, {3, 1, 2}, {3, 0, 2}} {
		s.calls.Store(0)
		r, err := l.Reserve(ctx, "k", floodgate.Cost{Requests: c.est})
		if err != nil || !r.Decision.Allowed {
			t.Fatalf("reserve %d: %+v, %v", c.est, r.Decision, err)
		}
		if _, err := r.Settle(ctx, floodgate.Cost{Requests: c.act}); err != nil {
			t.Fatal(err)
		}
		if got := s.calls.Load(); got != c.calls {
			t.Errorf("reserve %d, settle %d: %d store calls, want %d", c.est, c.act, got, c.calls)
		}
		clock.Advance(time.Hour)
	}
}
