// Package lease is a Store that decides hot keys locally from leases: the
// lease mode of a Limiter (and so of the middleware, the gRPC interceptors
// and the daemon's engine, which all decide through a Store). For a key
// under one policy counted in requests, it takes from the store it wraps a
// lease — the key's demand for one interval with a quarter to spare,
// bounded by half of what the store says is left — and answers from it
// until it runs out or the interval passes, so a process makes at most one
// store call per key per interval, however hot the key.
//
// The price is the bounded design of docs/SCALING.md: a lease held here is
// spent for every other process, so they may refuse what this one will
// not use before its lease ends (at a fixed or anchored window's end, or at the next
// refresh); and a key whose lease ran out is refused until the interval
// passes. Results report the store's answer at the last refresh, adjusted
// by what the lease has spent since. Several policies at once, and costs in
// content bytes, go to the wrapped store unchanged.
package lease

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/nilcheck"
)

// Store decides from leases taken from another Store. It is safe for
// concurrent use.
type Store struct {
	inner    floodgate.Store
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	leases  map[leaseKey]*entry
	sweepAt int // len(leases) at which the next insert sweeps
	calls   uint64
}

type leaseKey struct {
	key    string
	policy floodgate.Policy
}

// entry is one key's lease under one policy.
type entry struct {
	mu        sync.Mutex
	held      int64     // taken from the store and not yet spent here
	ends      time.Time // when held is void: a fixed or anchored window's end; zero: never
	refreshed time.Time // the last store call
	demand    int64     // requests asked since then, admitted or not
	last      floodgate.Result
}

// New returns a Store leasing from inner, refreshing each key's lease at
// most once per interval; now is the clock (nil: time.Now), the one inner
// should use too. Errors wrap floodgate.ErrInvalidOption for a nil store
// or an interval under a millisecond.
func New(inner floodgate.Store, interval time.Duration, now func() time.Time) (*Store, error) {
	if nilcheck.Nil(inner) || interval < time.Millisecond {
		return nil, fmt.Errorf("%w: lease: a store and an interval of at least 1ms are required", floodgate.ErrInvalidOption)
	}
	if now == nil {
		now = time.Now
	}
	return &Store{inner: inner, interval: interval, now: now, leases: map[leaseKey]*entry{}, sweepAt: minSweep}, nil
}

// StoreCalls is the number of calls made to the wrapped store.
func (s *Store) StoreCalls() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Take implements floodgate.Store: one policy counted in requests decides
// an admission from the key's lease; anything else (a peek, a post-charge
// or a refund, which the store must count as it is) goes to the wrapped
// store.
func (s *Store) Take(ctx context.Context, key string, cost floodgate.Cost, policies []floodgate.Policy, results []floodgate.Result) error {
	if len(policies) != 1 || policies[0].Unit != floodgate.Requests || cost.IsPeek() || cost.Kind != floodgate.Admit {
		s.count()
		return s.inner.Take(ctx, key, cost, policies, results)
	}
	if err := floodgate.CheckCost(cost, policies); err != nil {
		return err
	}
	e := s.entry(key, policies[0])
	e.mu.Lock()
	defer e.mu.Unlock()
	now := s.now()
	if !e.ends.IsZero() && !now.Before(e.ends) {
		e.held, e.ends = 0, time.Time{}
	}
	e.demand += cost.Requests
	if e.held < cost.Requests && (e.refreshed.IsZero() || now.Sub(e.refreshed) >= s.interval) {
		if err := s.refresh(ctx, key, policies, cost.Requests, e, now); err != nil {
			return err
		}
	}
	results[0] = e.answer(cost.Requests, now, e.refreshed.Add(s.interval))
	return nil
}

func (s *Store) count() {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
}

func (s *Store) entry(key string, p floodgate.Policy) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := leaseKey{key, p}
	e := s.leases[k]
	if e == nil {
		if len(s.leases) >= s.sweepAt {
			s.sweep()
		}
		e = &entry{}
		s.leases[k] = e
	}
	return e
}

// sweep forgets the leases idle for two intervals, so cold keys cost no
// memory for long: what such a lease held is spent for nothing, which
// errs towards refusing. s.mu held.
func (s *Store) sweep() {
	now := s.now()
	for k, e := range s.leases {
		if e.mu.TryLock() {
			if now.Sub(e.refreshed) >= 2*s.interval {
				delete(s.leases, k)
			}
			e.mu.Unlock()
		}
	}
	s.sweepAt = max(minSweep, 2*len(s.leases))
}

// minSweep is the number of leases below which none is swept.
const minSweep = 1024

// refresh takes the next lease: the demand since the last one, a quarter
// more (the policy's rate for an interval at first), and at least the cost
// at hand, bounded by half of what the store said was left (and by the
// policy's capacity).
func (s *Store) refresh(ctx context.Context, key string, ps []floodgate.Policy, cost int64, e *entry, now time.Time) error {
	want := max(int64(math.Ceil(float64(e.demand)*1.25)), cost)
	if e.refreshed.IsZero() { // no demand known: the policy's rate for an interval
		p := ps[0]
		want = max(cost, int64(math.Ceil(float64(p.Quota)*s.interval.Seconds()/p.Window.Seconds())))
	} else if e.last.Remaining > 0 {
		want = min(want, max(cost, e.last.Remaining/2))
	}
	want = min(want-e.held, ps[0].Capacity())
	s.count()
	var res [1]floodgate.Result
	if err := s.inner.Take(ctx, key, floodgate.Cost{Requests: want}, ps, res[:]); err != nil {
		return err
	}
	e.refreshed, e.demand, e.last = now, 0, res[0]
	if !res[0].Allowed {
		return nil
	}
	e.held += want
	switch ps[0].Algorithm {
	case floodgate.FixedWindow, floodgate.AnchoredWindow: // counts that restart
		e.ends = now.Add(res[0].ResetAfter) // the window's end
	}
	return nil
}

// answer spends cost from the lease if it holds that much.
func (e *entry) answer(cost int64, now, next time.Time) floodgate.Result {
	r := e.last
	r.ResetAfter = max(0, r.ResetAfter-now.Sub(e.refreshed))
	r.RetryAfter = max(0, r.RetryAfter-now.Sub(e.refreshed))
	r.FullAfter = max(0, r.FullAfter-now.Sub(e.refreshed))
	if e.held >= cost {
		e.held -= cost
		r.Allowed, r.RetryAfter = true, 0
		r.Remaining = e.last.Remaining + e.held
		return r
	}
	r.Allowed = false
	r.Remaining = e.last.Remaining + e.held
	if wait := next.Sub(now); r.RetryAfter < wait {
		r.RetryAfter = wait // no store call before the next refresh
	}
	return r
}

// Reset forgets the leases of key and resets it in the wrapped store.
func (s *Store) Reset(ctx context.Context, key string, policies []floodgate.Policy) error {
	s.mu.Lock()
	for _, p := range policies {
		delete(s.leases, leaseKey{key, p})
	}
	s.calls++
	s.mu.Unlock()
	return s.inner.Reset(ctx, key, policies)
}
