package floodgate_test

import (
	"context"
	"errors"
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
