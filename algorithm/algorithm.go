package algorithm

// Params are a policy's numbers in the algorithms' units.
type Params struct {
	Quota    int64 // Q: units per window
	Capacity int64 // C: bucket size of TokenBucket and GCRA (Burst, or Quota)
	Window   int64 // W: window in microseconds, ≥ 1
	// Start is, for a fixed window of a calendar period, the start (µs) of
	// the period that holds the decision's time, Window its length; 0
	// for windows aligned to multiples of Window since the epoch.
	Start int64
}

// windowStart is the start of the fixed window that holds now.
func windowStart(now int64, p Params) int64 {
	if p.Start != 0 {
		return p.Start
	}
	return now - now%p.Window
}

// State is the per-(key, policy) state of the O(1) algorithms; the meaning
// of A, B and C is given per algorithm in the package doc. W is the window
// (µs) the state was written under, so that a policy whose window changed
// reads it in its own (see "Policy changes"); 0 in a state written before
// the window was kept, which is read as written under the policy's window.
// The zero State is a fresh key: an empty window or a full bucket.
type State struct{ A, B, C, W int64 }

// Result is what an algorithm says about one request. Durations are in µs.
type Result struct {
	Allowed    bool
	Remaining  int64 // whole units available after the request (before it, if denied or a peek)
	ResetAfter int64 // effective window t: until more quota next becomes available
	RetryAfter int64 // when denied: until the cost fits; else 0
	// Full, for the sliding window counter only (0 for the others), is
	// until its estimate is back to zero, the whole quota free, if nothing
	// more is spent: X-RateLimit-Reset. Its ResetAfter moves earlier the
	// more a window spends, as a larger count decays faster.
	Full    int64
	Expires int64 // absolute µs after which the state equals the zero State
}

// ceilDiv divides non-negative a by positive b, rounding up.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// window is the window a state was written under: its W, or the policy's
// for a state that did not keep it.
func window(s *State, p Params) int64 {
	if s.W == 0 {
		return p.Window
	}
	return s.W
}
