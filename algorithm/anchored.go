package algorithm

// AnchoredWindow decides cost at time now (µs) for state *s = (start,
// count) of the window the key opened, writes the decision to *r, and
// updates *s if it admits a cost. A key has no window until a cost is
// charged: the first one opens a window of W at now. A state written under
// another window is a window that has ended, as for FixedWindow.
func AnchoredWindow(s *State, now int64, p Params, cost int64, r *Result) {
	start, count, open := anchored(s, now, p)
	avail := max(p.Quota-count, 0)
	*r = Result{Remaining: avail, Expires: start + p.Window}
	if open {
		r.ResetAfter = start + p.Window - now
	}
	if max(cost, 1) > avail {
		r.RetryAfter = r.ResetAfter
		return
	}
	r.Allowed = true
	if cost == 0 {
		return
	}
	r.Remaining, r.ResetAfter = avail-cost, start+p.Window-now
	*s = State{A: start, B: count + cost, W: p.Window}
}

// anchored reads *s at now: the start and count of the key's open window,
// or (now, 0, false) when it has none, its window having ended or been
// written under another length.
func anchored(s *State, now int64, p Params) (start, count int64, open bool) {
	if s.W == p.Window && now < s.A+p.Window {
		return s.A, s.B, true
	}
	return now, 0, false
}

// PostAnchoredWindow adds cost to the count of the key's open window,
// opening one at now if it has none, whatever the quota: a count past the
// quota refuses the rest of the window. The count stops at 2^53.
func PostAnchoredWindow(s *State, now int64, p Params, cost int64) {
	start, count, _ := anchored(s, now, p)
	*s = State{A: start, B: min(count+cost, maxExact), W: p.Window}
}

// RefundAnchoredWindow gives n back to the key's window if it held time
// at (and is of the policy's length); never below 0.
func RefundAnchoredWindow(s *State, at int64, p Params, n int64) {
	if s.W == p.Window && s.A <= at && at < s.A+p.Window {
		s.B = max(s.B-n, 0)
	}
}
