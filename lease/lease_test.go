package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/lease"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/storetest"
)

const interval = 100 * time.Millisecond

var fixed = floodgate.Policy{Name: "hot", Algorithm: floodgate.FixedWindow, Quota: 1000, Window: time.Second}

func setup(t *testing.T) (*storetest.Clock, floodgate.Store) {
	t.Helper()
	clock := storetest.NewClock(storetest.Epoch)
	return clock, testkit.Memory(t, memorystore.WithClock(clock.Now))
}

func leased(t *testing.T, inner floodgate.Store, clock *storetest.Clock) *lease.Store {
	t.Helper()
	s, err := lease.New(inner, interval, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// take decides n requests of cost 1 for key, returning those admitted and
// the last result.
func take(t *testing.T, s floodgate.Store, n int, ps ...floodgate.Policy) (admitted int, last floodgate.Result) {
	t.Helper()
	res := make([]floodgate.Result, len(ps))
	for range n {
		if err := s.Take(context.Background(), "k", floodgate.Cost{Requests: 1}, ps, res); err != nil {
			t.Fatal(err)
		}
		ok := true
		for _, r := range res {
			ok = ok && r.Allowed
		}
		if ok {
			admitted++
		}
	}
	return admitted, res[0]
}

func remaining(t *testing.T, s floodgate.Store) int64 {
	t.Helper()
	res := make([]floodgate.Result, 1)
	if err := s.Take(context.Background(), "k", floodgate.Cost{}, []floodgate.Policy{fixed}, res); err != nil {
		t.Fatal(err)
	}
	return res[0].Remaining
}

// TestLeases: exact, on an injected clock. The first lease is the
// policy's rate for an interval (100); once spent, the key is refused
// until the interval passes, with that wait as Retry-After; the next lease
// follows the demand asked since the last (149 + 1, a quarter more:
// 188); a fixed
// window's end voids what a lease still holds.
func TestLeases(t *testing.T) {
	clock, inner := setup(t)
	s := leased(t, inner, clock)
	got, last := take(t, s, 150, fixed)
	if got != 100 || last.Allowed || last.RetryAfter != interval || s.StoreCalls() != 1 {
		t.Fatalf("admitted %d, last %+v, %d store calls: want 100, a refusal until the interval ends, 1 call", got, last, s.StoreCalls())
	}
	if r := remaining(t, inner); r != 900 {
		t.Fatalf("the store has %d left, want 900", r)
	}
	clock.Advance(interval)
	got, last = take(t, s, 1, fixed)
	if got != 1 || last.Remaining != 712+187 || last.ResetAfter != 900*time.Millisecond || s.StoreCalls() != 2 {
		t.Fatalf("admitted %d, last %+v, %d calls: want the lease of 188, 712 + 187 remaining, 2 calls", got, last, s.StoreCalls())
	}
	if r := remaining(t, inner); r != 712 {
		t.Fatalf("the store has %d left, want 712", r)
	}
	clock.Advance(900 * time.Millisecond) // the next window: the 187 held are void
	got, _ = take(t, s, 300, fixed)
	// Demand 1 since the last lease: ⌈1.25⌉ = 2, at least the cost.
	if got != 2 || s.StoreCalls() != 3 || remaining(t, inner) != 998 {
		t.Fatalf("admitted %d, %d calls, %d left: want a lease of 2 from the new window", got, s.StoreCalls(), remaining(t, inner))
	}
}

// TestNeverOverQuota: two processes leasing one key of one store, each
// asked twice the quota, in 1 ms steps over five windows: each window
// admits at most the quota, at least 90 % of it, and each process makes at
// most one store call per interval.
func TestNeverOverQuota(t *testing.T) {
	clock, inner := setup(t)
	procs := []*lease.Store{leased(t, inner, clock), leased(t, inner, clock)}
	for w := range 5 {
		admitted := 0
		for range 1000 {
			for _, p := range procs {
				n, _ := take(t, p, 1, fixed)
				admitted += n
			}
			clock.Advance(time.Millisecond)
		}
		if admitted > 1000 || admitted < 900 {
			t.Fatalf("window %d admitted %d of 1000", w, admitted)
		}
	}
	for i, p := range procs {
		if calls := p.StoreCalls(); calls > 5*10 {
			t.Fatalf("process %d made %d store calls in 50 intervals", i, calls)
		}
	}
}

// TestPassThrough: several policies, costs in content bytes and peeks go
// to the wrapped store as they are.
func TestPassThrough(t *testing.T) {
	clock, inner := setup(t)
	s := leased(t, inner, clock)
	other := floodgate.Policy{Name: "b", Algorithm: floodgate.FixedWindow, Quota: 3, Window: time.Second}
	got, last := take(t, s, 5, fixed, other)
	if got != 3 || last.Remaining != 997 || s.StoreCalls() != 5 {
		t.Fatalf("admitted %d, last %+v, %d calls: want the store's own 3, 997 left, 5 calls", got, last, s.StoreCalls())
	}
	if _, err := lease.New(inner, time.Microsecond, nil); !errors.Is(err, floodgate.ErrInvalidOption) {
		t.Fatalf("an interval of 1µs: %v", err)
	}
}

// TestSettlementsPassThrough: a post-charge or a refund is the wrapped
// store's to count, past the quota too, never a lease's admission.
func TestSettlementsPassThrough(t *testing.T) {
	clock, inner := setup(t)
	s := leased(t, inner, clock)
	res := make([]floodgate.Result, 1)
	post := floodgate.Cost{Requests: 1500, Kind: floodgate.Post}
	if err := s.Take(context.Background(), "k", post, []floodgate.Policy{fixed}, res); err != nil || !res[0].Allowed {
		t.Fatalf("post-charge of 1500: %+v %v", res[0], err)
	}
	if got := remaining(t, inner); got != 0 || s.StoreCalls() != 1 {
		t.Fatalf("after a post-charge of 1500 on a quota of 1000: %d left in the store, %d calls; want 0 (in debt) and 1", got, s.StoreCalls())
	}
}

// TestAnchoredWindowEndVoidsLease: as a fixed window's, the end of the
// window a key opened voids what a lease still holds, since the store's
// count restarts there: spent after it, the held units would pass the
// next window's quota.
func TestAnchoredWindowEndVoidsLease(t *testing.T) {
	clock, inner := setup(t)
	s := leased(t, inner, clock)
	anchored := floodgate.Policy{Name: "hot", Algorithm: floodgate.AnchoredWindow, Quota: 1000, Window: time.Second}
	clock.Advance(300 * time.Millisecond) // the key's window: 0.3 s to 1.3 s
	if got, _ := take(t, s, 50, anchored); got != 50 || s.StoreCalls() != 1 {
		t.Fatalf("admitted %d in %d store calls, want 50 in 1 (a lease of 100)", got, s.StoreCalls())
	}
	clock.Advance(time.Second)
	if got, last := take(t, s, 1, anchored); got != 1 || s.StoreCalls() != 2 || last.ResetAfter != time.Second {
		t.Fatalf("after the window: admitted %d, %+v, %d store calls; want a new lease in the window it opens", got, last, s.StoreCalls())
	}
}
