package stats_test

import (
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/internal/opstest"
	"github.com/floodgate/floodgate/ops/stats"
)

func TestStatsSeries(t *testing.T) {
	clk := opstest.NewClock()
	s := stats.NewStats(stats.Config{Step: 5 * time.Second, Span: time.Minute, Now: clk.Now})
	for range 3 {
		s.Observe(engine.Event{Rule: "api", Key: "a", Verdict: engine.Allowed, Latency: time.Millisecond})
	}
	s.Observe(engine.Event{Verdict: engine.Denied, Rule: "api", Policy: "p", Key: "a", RetryAfter: 1500 * time.Millisecond, Latency: time.Millisecond})
	// A denial the store's near cache answered: its time is kept apart.
	s.Observe(engine.Event{Verdict: engine.Denied, Rule: "api", Policy: "p", Key: "a", RetryAfter: 30 * time.Second, CachedLatency: 2 * time.Microsecond})
	clk.Advance(5 * time.Second)
	s.Observe(engine.Event{Rule: "api", Policy: "p", Key: "a", Verdict: engine.Reduced, RetryAfter: 7 * time.Second})
	s.Observe(engine.Event{Rule: "api", Policy: "p", Key: "a", Shadow: true, RetryAfter: time.Hour})
	s.Observe(engine.Event{Rule: "api", Key: "a", Verdict: engine.Blocked, RetryAfter: time.Minute})
	s.Observe(engine.Event{Rule: "api", Key: "a", Verdict: engine.Blocked, RetryAfter: time.Minute})
	s.Observe(engine.Event{Rule: "api", Key: "a", Verdict: engine.Unavailable}) // not a limit's decision: not counted
	for range 4 {
		s.Observe(engine.Event{Rule: "login", Key: "b", Verdict: engine.Allowed})
	}

	snap := s.Snapshot()
	if len(snap.Times) != 12 || snap.StepSeconds != 5 {
		t.Fatalf("%d steps of %v s, want 12 of 5", len(snap.Times), snap.StepSeconds)
	}
	if last := snap.Times[11]; last != clk.Now().UnixMilli() {
		t.Fatalf("last step starts at %d, want %d", last, clk.Now().UnixMilli())
	}
	if len(snap.Rules) != 2 || snap.Rules[0].Rule != "api" || snap.Rules[1].Rule != "login" {
		t.Fatalf("rules %+v", snap.Rules)
	}
	api := snap.Rules[0]
	zero := make([]uint64, 10)
	if !slices.Equal(api.Allowed, append(zero, 3, 0)) || !slices.Equal(api.Limited, append(zero, 2, 0)) ||
		!slices.Equal(api.Reduced, append(zero, 0, 1)) || !slices.Equal(api.Shadow, append(zero, 0, 1)) ||
		!slices.Equal(api.Blocked, append(zero, 0, 2)) {
		t.Fatalf("api series %+v", api)
	}
	tot := snap.Totals
	if tot.Allowed != 7 || tot.Limited != 2 || tot.Blocked != 2 || tot.Reduced != 1 || tot.Shadow != 1 ||
		math.Abs(tot.RefusedShare-5.0/13) > 1e-12 {
		t.Fatalf("totals %+v", tot)
	}
	// Retry-After: 1.5 s → ≤2, 30 s → ≤30, 7 s → ≤10, the blocks' 1 m →
	// ≤1m; the shadow denial sent none.
	want := map[string]uint64{"≤2s": 1, "≤10s": 1, "≤30s": 1, "≤1m": 2}
	for _, b := range snap.RetryAfter {
		if b.Count != want[b.Label] {
			t.Fatalf("Retry-After buckets %+v", snap.RetryAfter)
		}
	}
	if q := snap.Latency.Steps[10]; q.N != 4 || q.P50 == nil || math.Abs(*q.P50-1) > 0.07 || snap.Latency.Steps[11].P50 != nil {
		t.Fatalf("latency steps %+v %+v", snap.Latency.Steps[10], snap.Latency.Steps[11])
	}
	if q := snap.CachedLatency.Steps[10]; q.N != 1 || q.P99 == nil || math.Abs(*q.P99-0.002) > 0.002*0.07 ||
		snap.CachedLatency.Overall.N != 1 || snap.Latency.Overall.N != 4 {
		t.Fatalf("near-cache latency %+v (overall %+v), store overall %+v", q, snap.CachedLatency.Overall, snap.Latency.Overall)
	}

	// A minute later everything has scrolled out.
	clk.Advance(time.Minute)
	if snap := s.Snapshot(); len(snap.Rules) != 0 || snap.Totals.Allowed != 0 || snap.Latency.Overall.N != 0 {
		t.Fatalf("after the span: %+v", snap.Totals)
	}
}

// TestStatsLatencyQuantiles: quantiles from the log-linear histogram are
// within 7% of the exact ones.
func TestStatsLatencyQuantiles(t *testing.T) {
	clk := opstest.NewClock()
	s := stats.NewStats(stats.Config{Now: clk.Now})
	for i := 1; i <= 10_000; i++ {
		// 1 µs … 10 ms, uniform.
		s.Observe(engine.Event{Rule: "r", Verdict: engine.Allowed, Latency: time.Duration(i) * time.Microsecond})
	}
	q := s.Snapshot().Latency.Overall
	for _, c := range []struct {
		got  *float64
		want float64
	}{{q.P50, 5}, {q.P95, 9.5}, {q.P99, 9.9}} {
		if c.got == nil || math.Abs(*c.got-c.want)/c.want > 0.07 {
			t.Fatalf("quantiles %+v, want p50 5 ms, p95 9.5 ms, p99 9.9 ms within 7%%", q)
		}
	}
	if q.N != 10_000 {
		t.Fatalf("N = %d", q.N)
	}
}

func TestStatsConcurrent(t *testing.T) {
	s := stats.NewStats(stats.Config{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				s.Observe(engine.Event{Rule: "r", Verdict: [2]engine.Verdict{engine.Allowed, engine.Denied}[(g+i)%2], Latency: time.Microsecond})
				if i%100 == 0 {
					s.Snapshot()
				}
			}
		})
	}
	wg.Wait()
	// The 8000 events may straddle a step boundary, never leave the span.
	if tot := s.Snapshot().Totals; tot.Allowed != 4000 || tot.Limited != 4000 {
		t.Fatalf("totals %+v", tot)
	}
}
