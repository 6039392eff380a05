package algorithm

// FixedWindow decides cost at time now (µs) for state s = (start, count).
func FixedWindow(s State, now int64, p Params, cost int64) (State, Result) {
	start := max(now-now%p.Window, s.A) // never step back into an older window
	var count int64
	if s.A == start {
		count = s.B
	}
	avail := max(p.Quota-count, 0)
	r := Result{Remaining: avail, ResetAfter: start + p.Window - now, Expires: start + p.Window}
	if max(cost, 1) > avail {
		r.RetryAfter = r.ResetAfter
		return s, r
	}
	r.Allowed = true
	if cost == 0 {
		return s, r
	}
	r.Remaining = avail - cost
	return State{A: start, B: count + cost}, r
}
