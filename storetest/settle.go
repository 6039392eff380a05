package storetest

import (
	"time"

	"github.com/floodgate/floodgate"
)

// settleScripts are post-charges and refunds (floodgate.Post, Refund) on
// every algorithm: a post-charge is counted past the quota and leaves the
// key in debt, reported as Remaining 0 and ResetAfter until the next unit
// is free again; a refund gives back to the window the cost was spent in.
func settleScripts() []script {
	const us = time.Microsecond
	// The scripts' policies, all per second; the buckets (10 per second,
	// bucket of 5) gain one token per 100 ms.
	one := func(name string, a floodgate.Algorithm, quota, burst int64) []floodgate.Policy {
		return []floodgate.Policy{pol(name, a, quota, s, burst)}
	}
	bucketSteps := []step{
		{at: 0, cost: 2, want: []want{ok(3, 100*ms)}},
		// 12 owed, 5 held: 8 units of refill (800 ms) until one is free.
		step{at: 0, cost: 10, want: []want{ok(0, 800*ms)}}.post(),
		{at: 500 * ms, cost: 1, want: []want{deny(0, 300*ms, 300*ms)}}, // 7 owed
		{at: 800 * ms, cost: 1, want: []want{ok(0, 100*ms)}},           // 4 owed: one token, spent
		step{at: 800 * ms, cost: 3, want: []want{ok(3, 100*ms)}}.refund(0),
		step{at: 800 * ms, cost: 6, err: floodgate.ErrCostExceedsQuota}.refund(0),
		step{at: 800 * ms, cost: floodgate.MaxPost + 1, err: floodgate.ErrInvalidCost}.post(),
		{at: 800 * ms, cost: 3, want: []want{ok(0, 100*ms)}}, // the errors changed nothing
	}
	return []script{
		{name: "PostFixedWindow", policies: one("fw", floodgate.FixedWindow, 3, 0), steps: []step{
			{at: 0, cost: 1, want: []want{ok(2, s)}},
			step{at: 100 * ms, cost: 4, want: []want{ok(0, 900*ms)}}.post(), // 5 of 3: in debt
			{at: 200 * ms, cost: 1, want: []want{deny(0, 800*ms, 800*ms)}},
			step{at: 300 * ms, cost: 3, want: []want{ok(1, 700*ms)}}.refund(0),
			// Spent in the window before: nothing to give back to this one.
			step{at: 400 * ms, cost: 1, want: []want{ok(1, 600*ms)}}.refund(-500 * ms),
			{at: s, cost: 3, want: []want{ok(0, s)}}, // the debt ends with its window
			step{at: 1100 * ms, cost: 1, want: []want{ok(1, 900*ms)}}.refund(s),
			// A refund for a key the store does not hold reports a fresh one.
			step{at: 1200 * ms, key: "x", cost: 1, want: []want{ok(3, 800*ms)}}.refund(s),
			// A post-charge on a key the store does not hold: counted.
			step{at: 1300 * ms, key: "y", cost: 5, want: []want{ok(0, 700*ms)}}.post(),
			{at: 1400 * ms, key: "y", cost: 1, want: []want{deny(0, 600*ms, 600*ms)}},
		}},
		{name: "PostSlidingWindowLog", policies: one("log", floodgate.SlidingWindowLog, 3, 0), steps: []step{
			{at: 0, cost: 1, want: []want{ok(2, s)}},
			// 5 of 3: one unit frees once 3 have left, at the 100 ms entry's exit.
			step{at: 100 * ms, cost: 4, want: []want{ok(0, s)}}.post(),
			{at: 200 * ms, cost: 1, want: []want{deny(0, 900*ms, 900*ms)}},
			// 2 of the 100 ms entry back: 3 held, the oldest frees the next.
			step{at: 300 * ms, cost: 2, want: []want{ok(0, 700*ms)}}.refund(100 * ms),
			{at: s, cost: 1, want: []want{ok(0, 100*ms)}},
			{at: 1100 * ms, cost: 2, want: []want{ok(0, 900*ms)}},
		}},
		{name: "PostSlidingWindowCounter", policies: one("swc", floodgate.SlidingWindowCounter, 10, 0), steps: []step{
			// 4 this window: a 7th unit once 4·(1−e) ≤ 3 in the next, e = 250 ms.
			{at: 0, cost: 4, want: []want{ok(6, 1250*ms).full(2 * s)}},
			// 14 of 10: one unit once 14·(1−e) ≤ 9, e = 1 s − ⌊9 s/14⌋.
			step{at: 100 * ms, cost: 10, want: []want{ok(0, 1257143*us).full(1900 * ms)}}.post(),
			{at: 1357142 * us, cost: 1, want: []want{deny(0, us, us).full(642858 * us)}},
			{at: 1357143 * us, cost: 1, want: []want{ok(0, 71429*us).full(1642857 * us)}},
			// 10 back to the window before: prev 4, curr 1, half-way: 3 used.
			step{at: 1500 * ms, cost: 10, want: []want{ok(7, 250*ms).full(1500 * ms)}}.refund(100 * ms),
		}},
		postAnchoredWindow(),
		{name: "PostTokenBucket", policies: one("tb", floodgate.TokenBucket, 10, 5), steps: bucketSteps},
		{name: "PostGCRA", policies: one("gcra", floodgate.GCRA, 10, 5), steps: bucketSteps},
	}
}

// postAnchoredWindow is settleScripts' script of the anchored window: as
// the fixed window's, in the window the key opened.
func postAnchoredWindow() script {
	return script{name: "PostAnchoredWindow", policies: []floodgate.Policy{pol("aw", floodgate.AnchoredWindow, 3, s, 0)}, steps: []step{
		{at: 0, cost: 1, want: []want{ok(2, s)}},                        // opens the key's window, to 1 s
		step{at: 100 * ms, cost: 4, want: []want{ok(0, 900*ms)}}.post(), // 5 of 3: in debt
		{at: 200 * ms, cost: 1, want: []want{deny(0, 800*ms, 800*ms)}},
		step{at: 300 * ms, cost: 3, want: []want{ok(1, 700*ms)}}.refund(0),
		// Spent before the key's window: nothing to give back to it.
		step{at: 400 * ms, cost: 1, want: []want{ok(1, 600*ms)}}.refund(-500 * ms),
		{at: s, cost: 3, want: []want{ok(0, s)}}, // the debt ends with its window
		step{at: 1100 * ms, cost: 1, want: []want{ok(1, 900*ms)}}.refund(s),
		// A refund for a key the store does not hold reports a fresh one.
		step{at: 1200 * ms, key: "x", cost: 1, want: []want{ok(3, 0)}}.refund(s),
		// A post-charge on a key the store does not hold opens its window.
		step{at: 1300 * ms, key: "y", cost: 5, want: []want{ok(0, s)}}.post(),
		{at: 1400 * ms, key: "y", cost: 1, want: []want{deny(0, 900*ms, 900*ms)}},
	}}
}
