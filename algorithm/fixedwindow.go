package algorithm

// FixedWindow decides cost at time now (µs) for state *s = (start, count),
// writes the decision to *r, and updates *s if it admits a cost. A state
// written under another window is a window that has ended: the count
// restarts in the policy's current window.
func FixedWindow(s *State, now int64, p Params, cost int64, r *Result) {
	start := windowStart(now, p)
	var count int64
	if window(s, p) == p.Window {
		start = max(start, s.A) // never step back into an older window
		if s.A == start {
			count = s.B
		}
	}
	avail := max(p.Quota-count, 0)
	*r = Result{Remaining: avail, ResetAfter: start + p.Window - now, Expires: start + p.Window}
	if max(cost, 1) > avail {
		r.RetryAfter = r.ResetAfter
		return
	}
	r.Allowed = true
	if cost == 0 {
		return
	}
	r.Remaining = avail - cost
	*s = State{A: start, B: count + cost, W: p.Window}
}
