package algorithm

// SlidingWindowCounter decides cost at time now (µs) for state
// s = (start of the current window, curr, prev).
func SlidingWindowCounter(s State, now int64, p Params, cost int64) (State, Result) {
	w, q := p.Window, p.Quota
	start := now - now%w
	var prev, curr int64
	switch {
	case s.A >= start: // this window (or a later one, if the clock stepped back)
		start, curr, prev = s.A, s.B, s.C
	case s.A == start-w:
		prev = s.B
	}
	e := max(now-start, 0)
	used := prev*(w-e) + curr*w // the estimate, scaled by W
	avail := max((q*w-used)/w, 0)
	r := Result{Remaining: avail, ResetAfter: start + w - now, Expires: start + 2*w}
	c := max(cost, 1)
	if c > avail {
		if a := q - c - curr; a >= 0 {
			// prev > 0 here, or c would fit: the estimate decays within this window.
			r.RetryAfter = w - a*w/prev - e
		} else {
			// curr > q−c ≥ 0: wait for the next window, where prev′ = curr.
			r.RetryAfter = r.ResetAfter + w - (q-c)*w/curr
		}
		return s, r
	}
	r.Allowed = true
	if cost == 0 {
		return s, r
	}
	r.Remaining = avail - cost
	return State{A: start, B: curr + cost, C: prev}, r
}
