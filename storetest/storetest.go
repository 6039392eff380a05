// Package storetest is the conformance suite every floodgate.Store must
// pass: scripted sequences of (time, key, policies, cost) with the exact
// Allowed, Remaining, ResetAfter and RetryAfter that package algorithm
// defines. The memory and Redis stores run the same suite with the same
// expected values, which is how they are known to agree (REQUIREMENTS A5, S4).
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, now func() time.Time) floodgate.Store {
//			return mystore.New(mystore.WithClock(now))
//		})
//	}
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
)

// NewStore returns an empty store whose clock is now. Each call must give a
// store (or key space) that shares no state with earlier ones.
type NewStore func(t *testing.T, now func() time.Time) floodgate.Store

// Epoch is the suite's time zero: a whole hour, so aligned windows of a
// second, a minute or an hour all start there.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a settable clock, safe for concurrent use.
type Clock struct{ ns atomic.Int64 }

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { c := &Clock{}; c.Set(t); return c }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.ns.Store(t.UnixNano()) }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Sleep advances the clock by d at once, or returns ctx.Err() if ctx has
// ended: with Now, it makes a Clock a floodgate.Clock, so a Limiter's Wait
// runs in no real time.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	return nil
}

// step is one request of a script and what each policy must answer.
type step struct {
	at   time.Duration // since Epoch
	key  string
	cost int64
	want []want // one per policy
	err  error  // wanted error, if any
	kind floodgate.CostKind
	// since is a Refund's Cost.At, after Epoch.
	since time.Duration
}

// post and refund make a step a post-charge or a refund of a cost
// admitted at since.
func (st step) post() step { st.kind = floodgate.Post; return st }
func (st step) refund(since time.Duration) step {
	st.kind, st.since = floodgate.Refund, since
	return st
}

type want struct {
	allowed    bool
	remaining  int64
	resetAfter time.Duration
	retryAfter time.Duration
	fullAfter  time.Duration // the sliding window counter's; 0 for the others
}

func ok(remaining int64, reset time.Duration) want {
	return want{allowed: true, remaining: remaining, resetAfter: reset}
}

func deny(remaining int64, reset, retry time.Duration) want {
	return want{remaining: remaining, resetAfter: reset, retryAfter: retry}
}

// full is w with a sliding window counter's FullAfter.
func (w want) full(d time.Duration) want { w.fullAfter = d; return w }

type script struct {
	name     string
	policies []floodgate.Policy
	steps    []step
}

const (
	ms = time.Millisecond
	s  = time.Second
)

func pol(name string, a floodgate.Algorithm, quota int64, window time.Duration, burst int64) floodgate.Policy {
	return floodgate.Policy{Name: name, Algorithm: a, Quota: quota, Window: window, Burst: burst}
}

// Run runs the whole suite against stores made by newStore.
func Run(t *testing.T, newStore NewStore) {
	t.Run("Scripts", func(t *testing.T) {
		for _, sc := range append(append(scripts(), settleScripts()...), calendarScripts(t)...) {
			t.Run(sc.name, func(t *testing.T) { play(t, newStore, sc) })
		}
	})
	t.Run("LimitPlusOne", func(t *testing.T) { limitPlusOne(t, newStore) })
	t.Run("Concurrent", func(t *testing.T) { concurrent(t, newStore) })
	t.Run("ManyKeys", func(t *testing.T) { manyKeys(t, newStore) })
	t.Run("Reset", func(t *testing.T) { reset(t, newStore) })
	t.Run("Units", func(t *testing.T) { units(t, newStore) })
	t.Run("Identity", func(t *testing.T) { identity(t, newStore) })
	t.Run("GCRARaise", func(t *testing.T) { gcraRaise(t, newStore) })
	t.Run("Raise", func(t *testing.T) { raise(t, newStore) })
	t.Run("WindowRaise", func(t *testing.T) { windowRaise(t, newStore) })
	t.Run("PolicyChanges", func(t *testing.T) { policyChanges(t, newStore) })
	t.Run("LogBeyondEpoch", func(t *testing.T) { logBeyondEpoch(t, newStore) })
	t.Run("Wait", func(t *testing.T) { wait(t, newStore) })
	t.Run("Reservations", func(t *testing.T) { reservations(t, newStore) })
}

// each is a cost of c in every unit.
func each(c int64) floodgate.Cost { return floodgate.Cost{Requests: c, ContentBytes: c} }

func play(t *testing.T, newStore NewStore, sc script) {
	clock := NewClock(Epoch)
	st := newStore(t, clock.Now)
	res := make([]floodgate.Result, len(sc.policies))
	for i, stp := range sc.steps {
		clock.Set(Epoch.Add(stp.at))
		key := stp.key
		if key == "" {
			key = "k"
		}
		clear(res)
		cost := each(stp.cost)
		cost.Kind, cost.At = stp.kind, Epoch.Add(stp.since)
		err := st.Take(context.Background(), key, cost, sc.policies, res)
		where := fmt.Sprintf("step %d (t=%v key=%s cost=%d kind=%d)", i, stp.at, key, stp.cost, stp.kind)
		if stp.err != nil {
			if !errors.Is(err, stp.err) {
				t.Fatalf("%s: error %v, want %v", where, err, stp.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		for j, w := range stp.want {
			r := res[j]
			got := want{r.Allowed, r.Remaining, r.ResetAfter, r.RetryAfter, r.FullAfter}
			if got != w {
				t.Errorf("%s policy %s:\n got  allowed=%v remaining=%d reset=%v retry=%v full=%v\n want allowed=%v remaining=%d reset=%v retry=%v full=%v",
					where, sc.policies[j].Name, got.allowed, got.remaining, got.resetAfter, got.retryAfter, got.fullAfter,
					w.allowed, w.remaining, w.resetAfter, w.retryAfter, w.fullAfter)
			}
		}
	}
}

// algorithms is every algorithm (floodgate.Algorithms): each suite runs
// them all, so a store that misses a new one fails here.
var algorithms = floodgate.Algorithms()

// limitPlusOne is seed case V1: limit + 1 calls at one instant, the last is
// rejected, for every algorithm.
func limitPlusOne(t *testing.T, newStore NewStore) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			clock := NewClock(Epoch.Add(250 * ms))
			st := newStore(t, clock.Now)
			ps := []floodgate.Policy{pol("v1", a, 5, time.Minute, 0)}
			res := make([]floodgate.Result, 1)
			for i := range 6 {
				if err := st.Take(context.Background(), "client", each(1), ps, res); err != nil {
					t.Fatal(err)
				}
				if wantOK := i < 5; res[0].Allowed != wantOK || res[0].Remaining != max(int64(4-i), 0) {
					t.Fatalf("call %d: allowed=%v remaining=%d, want allowed=%v remaining=%d", i+1, res[0].Allowed, res[0].Remaining, wantOK, max(4-i, 0))
				}
			}
			if res[0].RetryAfter <= 0 {
				t.Fatalf("denied call has RetryAfter %v, want > 0", res[0].RetryAfter)
			}
		})
	}
}

// concurrent is seed case V2: limit + 5 goroutines at once; exactly the
// limit is admitted (at most, by V2; exactly, since the clock stands still).
func concurrent(t *testing.T, newStore NewStore) {
	const limit = 50
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			clock := NewClock(Epoch.Add(10 * ms))
			st := newStore(t, clock.Now)
			ps := []floodgate.Policy{pol("v2", a, limit, time.Minute, 0), pol("other", floodgate.FixedWindow, 1000, time.Hour, 0)}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range limit + 5 {
				wg.Go(func() {
					res := make([]floodgate.Result, 2)
					<-start
					if err := st.Take(context.Background(), "hot", each(1), ps, res); err != nil {
						t.Error(err)
						return
					}
					if !res[1].Allowed {
						t.Errorf("policy other denied below its quota")
					}
					if res[0].Allowed {
						admitted.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			if got := admitted.Load(); got != limit {
				t.Fatalf("admitted %d of %d, want exactly %d", got, limit+5, limit)
			}
			// All or nothing: the denied requests spent nothing from "other".
			res := make([]floodgate.Result, 2)
			if err := st.Take(context.Background(), "hot", each(0), ps, res); err != nil {
				t.Fatal(err)
			}
			if res[1].Remaining != 1000-limit {
				t.Fatalf("policy other has %d remaining, want %d", res[1].Remaining, 1000-limit)
			}
		})
	}
}

func manyKeys(t *testing.T, newStore NewStore) {
	clock := NewClock(Epoch)
	st := newStore(t, clock.Now)
	ps := []floodgate.Policy{pol("each", floodgate.SlidingWindowCounter, 1, time.Minute, 0)}
	res := make([]floodgate.Result, 1)
	for round, wantOK := range []bool{true, false} {
		for i := range 500 {
			if err := st.Take(context.Background(), fmt.Sprintf("key-%d", i), each(1), ps, res); err != nil {
				t.Fatal(err)
			}
			if res[0].Allowed != wantOK {
				t.Fatalf("round %d key %d: allowed=%v, want %v", round, i, res[0].Allowed, wantOK)
			}
		}
	}
	// Two windows later every key is fresh again.
	clock.Advance(2 * time.Minute)
	for i := range 500 {
		if err := st.Take(context.Background(), fmt.Sprintf("key-%d", i), each(1), ps, res); err != nil {
			t.Fatal(err)
		}
		if !res[0].Allowed || res[0].Remaining != 0 {
			t.Fatalf("after expiry key %d: allowed=%v remaining=%d, want true 0", i, res[0].Allowed, res[0].Remaining)
		}
	}
}

func reset(t *testing.T, newStore NewStore) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			clock := NewClock(Epoch)
			st := newStore(t, clock.Now)
			ps := []floodgate.Policy{pol("r", a, 2, time.Hour, 0)}
			res := make([]floodgate.Result, 1)
			for range 3 {
				if err := st.Take(context.Background(), "k", each(1), ps, res); err != nil {
					t.Fatal(err)
				}
			}
			if res[0].Allowed {
				t.Fatal("third call admitted, want denied")
			}
			if err := st.Reset(context.Background(), "k", ps); err != nil {
				t.Fatal(err)
			}
			if err := st.Take(context.Background(), "k", each(0), ps, res); err != nil {
				t.Fatal(err)
			}
			if res[0].Remaining != 2 {
				t.Fatalf("after Reset remaining %d, want 2", res[0].Remaining)
			}
		})
	}
}

// units: one request spends a count and a body size, each from the
// policies of its own unit, all or nothing across both (REQUIREMENTS K3).
// A request denied by the content-bytes policy spends nothing from the
// requests policy, and a request with no body is not denied by an
// exhausted content-bytes policy it spends nothing from.
func units(t *testing.T, newStore NewStore) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			clock := NewClock(Epoch)
			st := newStore(t, clock.Now)
			ps := []floodgate.Policy{pol("req", a, 3, time.Hour, 0), pol("bytes", floodgate.FixedWindow, 10, time.Hour, 0)}
			ps[1].Unit = floodgate.ContentBytes
			res := make([]floodgate.Result, 2)
			take := func(c floodgate.Cost) {
				t.Helper()
				clear(res)
				if err := st.Take(context.Background(), "u", c, ps, res); err != nil {
					t.Fatal(err)
				}
			}
			take(floodgate.Cost{Requests: 1, ContentBytes: 8})
			if !res[0].Allowed || !res[1].Allowed || res[0].Remaining != 2 || res[1].Remaining != 2 {
				t.Fatalf("first request: %+v, want both admitted with 2 left", res)
			}
			take(floodgate.Cost{Requests: 1, ContentBytes: 8})
			if res[1].Allowed || !res[0].Allowed || res[0].Remaining != 2 {
				t.Fatalf("second request: %+v, want bytes denying and req reporting 2 left, unspent", res)
			}
			take(floodgate.Cost{Requests: 1})
			if !res[0].Allowed || !res[1].Allowed || res[0].Remaining != 1 || res[1].Remaining != 2 || res[1].RetryAfter != 0 {
				t.Fatalf("bodiless request: %+v, want admitted with req 1 left and bytes 2 left", res)
			}
			take(floodgate.Cost{})
			if res[0].Remaining != 1 || res[1].Remaining != 2 {
				t.Fatalf("peek after: %+v, want req 1 and bytes 2 left", res)
			}
			take(floodgate.Cost{ContentBytes: 3})
			if res[1].Allowed || !res[0].Allowed || res[0].Remaining != 1 {
				t.Fatalf("body over the bytes left: %+v, want bytes denying and req unspent at 1", res)
			}
			// The content-bytes policy alone, exhausted: a bodiless request
			// is charged nothing by it, yet is no peek, so it is not denied;
			// a peek says that 1 more would not pass.
			take(floodgate.Cost{ContentBytes: 2})
			if !res[1].Allowed || res[1].Remaining != 0 {
				t.Fatalf("body of the bytes left: %+v, want admitted with 0 left", res)
			}
			alone := make([]floodgate.Result, 1)
			if err := st.Take(context.Background(), "u", floodgate.Cost{Requests: 1}, ps[1:], alone); err != nil {
				t.Fatal(err)
			}
			if r := alone[0]; !r.Allowed || r.Remaining != 0 || r.RetryAfter != 0 {
				t.Fatalf("bodiless request to the exhausted bytes policy alone: %+v, want admitted, 0 left, no retry", r)
			}
			if err := st.Take(context.Background(), "u", floodgate.Cost{}, ps[1:], alone); err != nil {
				t.Fatal(err)
			}
			if r := alone[0]; r.Allowed || r.Remaining != 0 || r.RetryAfter == 0 {
				t.Fatalf("peek at the exhausted bytes policy alone: %+v, want denied with a retry", r)
			}
		})
	}
}

// identity: a policy's state is known by its name and its algorithm, so
// the same name under two algorithms keeps two states, in every store.
func identity(t *testing.T, newStore NewStore) {
	clock := NewClock(Epoch)
	st := newStore(t, clock.Now)
	fw := []floodgate.Policy{pol("same", floodgate.FixedWindow, 2, time.Hour, 0)}
	tb := []floodgate.Policy{pol("same", floodgate.TokenBucket, 2, time.Hour, 0)}
	res := make([]floodgate.Result, 1)
	for range 2 {
		if err := st.Take(context.Background(), "id", each(1), fw, res); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Take(context.Background(), "id", each(1), tb, res); err != nil {
		t.Fatal(err)
	}
	if !res[0].Allowed || res[0].Remaining != 1 {
		t.Fatalf("token bucket after the fixed window spent its quota: %+v, want a state of its own with 1 left", res[0])
	}
	if err := st.Take(context.Background(), "id", floodgate.Cost{}, fw, res); err != nil {
		t.Fatal(err)
	}
	if res[0].Remaining != 0 {
		t.Fatalf("fixed window after the token bucket: remaining %d, want its own 0", res[0].Remaining)
	}
}
