package storetest

import (
	"time"

	"github.com/floodgate/floodgate"
)

// scripts are the suite's sequences. Every expected value follows from the
// formulas in package algorithm's doc; the comments show the arithmetic.
func scripts() []script {
	fixed := []floodgate.Policy{pol("fw", floodgate.FixedWindow, 3, s, 0)}
	log := []floodgate.Policy{pol("log", floodgate.SlidingWindowLog, 3, s, 0)}
	counter := []floodgate.Policy{pol("swc", floodgate.SlidingWindowCounter, 10, s, 0)}
	// 10 per second, bucket of 5: one token per 100 ms.
	tb := []floodgate.Policy{pol("tb", floodgate.TokenBucket, 10, s, 5)}
	gcra := []floodgate.Policy{pol("gcra", floodgate.GCRA, 10, s, 5)}
	anchored := []floodgate.Policy{pol("aw", floodgate.AnchoredWindow, 3, s, 0)}
	bucketSteps := []step{
		{at: 0, cost: 5, want: []want{ok(0, 100*ms)}},                 // empty the bucket; next token in 100 ms
		{at: 0, cost: 1, want: []want{deny(0, 100*ms, 100*ms)}},       // (1 − 0 tokens) / 10 per s
		{at: 50 * ms, cost: 1, want: []want{deny(0, 50*ms, 50*ms)}},   // half a token
		{at: 100 * ms, cost: 1, want: []want{ok(0, 100*ms)}},          // one token, spent
		{at: 130 * ms, cost: 2, want: []want{deny(0, 70*ms, 170*ms)}}, // 0.3 tokens; 1.7 more take 170 ms
		{at: 10 * s, cost: 1, want: []want{ok(4, 100*ms)}},            // refilled to 5, not beyond
		{at: time.Hour, cost: 0, want: []want{ok(5, 0)}},              // a peek after an idle hour: exactly full
		{at: time.Hour, cost: 6, err: floodgate.ErrCostExceedsQuota},
		{at: time.Hour, cost: -1, err: floodgate.ErrInvalidCost},
		{at: time.Hour, cost: 5, want: []want{ok(0, 100*ms)}}, // the errors spent nothing
	}
	return []script{
		{name: "FixedWindow", policies: fixed, steps: []step{
			{at: 0, cost: 1, want: []want{ok(2, s)}},
			{at: 100 * ms, cost: 1, want: []want{ok(1, 900*ms)}},
			{at: 200 * ms, cost: 1, want: []want{ok(0, 800*ms)}},
			{at: 300 * ms, cost: 1, want: []want{deny(0, 700*ms, 700*ms)}}, // wait for the next window
			{at: 999 * ms, cost: 0, want: []want{deny(0, time.Millisecond, time.Millisecond)}},
			{at: s, cost: 1, want: []want{ok(2, s)}},
		}},
		{name: "FixedWindowBoundaryBurst", policies: fixed, steps: []step{
			// 2 × quota within 2 ms across the boundary: the documented flaw of A1.
			{at: 999 * ms, cost: 3, want: []want{ok(0, ms)}},
			{at: 999 * ms, cost: 1, want: []want{deny(0, ms, ms)}},
			{at: 1001 * ms, cost: 3, want: []want{ok(0, 999*ms)}},
		}},
		{name: "SlidingWindowLog", policies: log, steps: []step{
			{at: 0, cost: 1, want: []want{ok(2, s)}}, // t: when the oldest entry leaves
			{at: 100 * ms, cost: 1, want: []want{ok(1, 900*ms)}},
			{at: 200 * ms, cost: 1, want: []want{ok(0, 800*ms)}},
			{at: 300 * ms, cost: 1, want: []want{deny(0, 700*ms, 700*ms)}}, // entry 0 leaves at 1 s
			{at: 300 * ms, cost: 2, want: []want{deny(0, 700*ms, 800*ms)}}, // entries 0 and 100 ms must leave
			{at: 1000 * ms, cost: 1, want: []want{ok(0, 100*ms)}},          // entry 0 left; 100 and 200 remain
			{at: 1050 * ms, cost: 1, want: []want{deny(0, 50*ms, 50*ms)}},
			{at: 1100 * ms, cost: 1, want: []want{ok(0, 100*ms)}},
			{at: 3 * s, cost: 3, err: nil, want: []want{ok(0, s)}}, // all entries gone
			{at: 3 * s, cost: 4, err: floodgate.ErrCostExceedsQuota},
		}},
		{name: "SlidingWindowLogSameMicrosecond", policies: log, steps: []step{
			{at: 5 * ms, cost: 1, want: []want{ok(2, s)}},
			{at: 5 * ms, cost: 1, want: []want{ok(1, s)}},
			{at: 5 * ms, cost: 1, want: []want{ok(0, s)}},
			{at: 5 * ms, cost: 1, want: []want{deny(0, s, s)}},
			{at: 1005 * ms, cost: 3, want: []want{ok(0, s)}},
		}},
		{name: "SlidingWindowCounter", policies: counter, steps: []step{
			// t is when one more unit fits: in the next window, where
			// 10·(1000−e″)/1000 + 1 ≤ 10 at e″ = 100 ms. The quota is all
			// free again (full) once the count has decayed as the
			// previous window's: at the end of the next window, 2 s.
			{at: 500 * ms, cost: 10, want: []want{ok(0, 600*ms).full(1500 * ms)}},
			{at: 600 * ms, cost: 1, want: []want{deny(0, 500*ms, 500*ms).full(1400 * ms)}},
			// 1 s + 99 ms: estimate 10·0.901 = 9.01, so still no room; the
			// 10 are gone at this window's end, 2 s.
			{at: 1099 * ms, cost: 1, want: []want{deny(0, ms, ms).full(901 * ms)}},
			// 9 + 1 = 10; the next unit once 10·(1000−e′)/1000 ≤ 8, at e′ =
			// 200 ms; full at the next window's end, 3 s.
			{at: 1100 * ms, cost: 1, want: []want{ok(0, 100*ms).full(1900 * ms)}},
			{at: 1200 * ms, cost: 1, want: []want{ok(0, 100*ms).full(1800 * ms)}}, // 8 + 2 = 10
			// 7.5 + 2 = 9.5: c fits once 10·(1000−e′)/1000 ≤ 10−1−2, at e′ = 300 ms.
			{at: 1250 * ms, cost: 1, want: []want{deny(0, 50*ms, 50*ms).full(1750 * ms)}},
			// 4 + 2 = 6 used; a fifth unit once 10·(1000−e′)/1000 ≤ 3, at 700 ms.
			{at: 1600 * ms, cost: 0, want: []want{ok(4, 100*ms).full(1400 * ms)}},
			{at: 1600 * ms, cost: 4, want: []want{ok(0, 100*ms).full(1400 * ms)}},
			{at: 3 * s, cost: 0, want: []want{ok(10, 0)}}, // two windows on: both counters gone
			{at: 3 * s, cost: 11, err: floodgate.ErrCostExceedsQuota},
		}},
		{name: "TokenBucket", policies: tb, steps: bucketSteps},
		{name: "GCRA", policies: gcra, steps: bucketSteps},
		{name: "AnchoredWindow", policies: anchored, steps: []step{
			{at: 400 * ms, cost: 0, want: []want{ok(3, 0)}}, // a peek opens no window: nothing is used
			{at: 500 * ms, cost: 1, want: []want{ok(2, s)}}, // the key's window: 500 ms to 1.5 s
			{at: 600 * ms, cost: 2, want: []want{ok(0, 900*ms)}},
			{at: 700 * ms, cost: 1, want: []want{deny(0, 800*ms, 800*ms)}}, // wait for the window's end
			{at: 1499 * ms, cost: 0, want: []want{deny(0, ms, ms)}},
			{at: 1500 * ms, cost: 0, want: []want{ok(3, 0)}}, // ended; the next request opens the next
			// 2 × quota within 2 ms across the window's end: the flaw of A1, per key.
			{at: 1700 * ms, cost: 3, want: []want{ok(0, s)}},
			{at: 2699 * ms, cost: 1, want: []want{deny(0, ms, ms)}},
			{at: 2701 * ms, cost: 3, want: []want{ok(0, s)}},
			{at: 2701 * ms, cost: 4, err: floodgate.ErrCostExceedsQuota},
		}},
		{name: "AnchoredWindowKeys", policies: anchored, steps: []step{
			// Each key opens its own window: they do not all end at once.
			{at: 100 * ms, key: "a", cost: 3, want: []want{ok(0, s)}},
			{at: 600 * ms, key: "b", cost: 1, want: []want{ok(2, s)}},
			{at: 1100 * ms, key: "a", cost: 1, want: []want{ok(2, s)}},
			{at: 1100 * ms, key: "b", cost: 2, want: []want{ok(0, 500*ms)}},
		}},
		{name: "SeveralPolicies", policies: []floodgate.Policy{
			pol("short", floodgate.FixedWindow, 2, s, 0),
			pol("long", floodgate.SlidingWindowLog, 3, time.Minute, 0),
		}, steps: []step{
			{at: 0, cost: 1, want: []want{ok(1, s), ok(2, time.Minute)}},
			{at: 100 * ms, cost: 1, want: []want{ok(0, 900*ms), ok(1, 59900*ms)}},
			// short denies; long would admit but spends nothing.
			{at: 200 * ms, cost: 1, want: []want{deny(0, 800*ms, 800*ms), ok(1, 59800*ms)}},
			{at: s, cost: 1, want: []want{ok(1, s), ok(0, 59*s)}},
			// long denies; short would admit but spends nothing.
			{at: 1100 * ms, cost: 1, want: []want{ok(1, 900*ms), deny(0, 58900*ms, 58900*ms)}},
			{at: 1200 * ms, cost: 0, want: []want{ok(1, 800*ms), deny(0, 58800*ms, 58800*ms)}},
		}},
		{name: "Keys", policies: fixed, steps: []step{
			{key: "a", cost: 3, want: []want{ok(0, s)}},
			{key: "a", cost: 1, want: []want{deny(0, s, s)}},
			{key: "b", cost: 1, want: []want{ok(2, s)}},
			{key: "a:b{c}", cost: 1, want: []want{ok(2, s)}},
		}},
	}
}
