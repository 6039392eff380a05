package algorithm

// SlidingWindowCounter decides cost at time now (µs) for state
// *s = (start of the current window, curr, prev), writes the decision to
// *r, and updates *s if it admits a cost.
func SlidingWindowCounter(s *State, now int64, p Params, cost int64, r *Result) {
	w, q := p.Window, p.Quota
	start, curr, prev := counters(s, now, p)
	e := max(now-start, 0)
	used := prev*(w-e) + curr*w // the estimate, scaled by W
	avail := max((q*w-used)/w, 0)
	*r = Result{Remaining: avail, Expires: start + 2*w}
	c := max(cost, 1)
	if c > avail {
		r.RetryAfter = counterWait(c, prev, curr, e, p)
		r.ResetAfter = counterWait(avail+1, prev, curr, e, p)
		r.Full = counterWait(q, prev, curr, e, p)
		return
	}
	r.Allowed = true
	if cost > 0 {
		curr += cost
		r.Remaining = avail - cost
	}
	if r.Remaining < q {
		r.ResetAfter = counterWait(r.Remaining+1, prev, curr, e, p)
		r.Full = counterWait(q, prev, curr, e, p)
	}
	if cost == 0 {
		return
	}
	*s = State{A: start, B: curr, C: prev, W: w}
}

// counters reads *s at now: the start of the policy's current window and
// its two counters. A state written under another window is read as the
// units its estimate still holds at now, rounded up to whole units (at
// most the quota) and counted in the current window, so that a changed
// window neither forgets what was spent nor holds more of it.
func counters(s *State, now int64, p Params) (start, curr, prev int64) {
	w := window(s, p)
	start = now - now%w
	switch {
	case s.A >= start: // this window (or a later one, if the clock stepped back)
		start, curr, prev = s.A, s.B, s.C
	case s.A == start-w:
		prev = s.B
	}
	if w == p.Window {
		return start, curr, prev
	}
	e := max(now-start, 0)
	held := curr + ceilDiv(prev*(w-e), w)
	return now - now%p.Window, min(held, p.Quota), 0
}

// counterWait is the exact time (µs) from e until c units fit, given the
// counters of the window that began e µs ago; c must not exceed Q.
func counterWait(c, prev, curr, e int64, p Params) int64 {
	w, q := p.Window, p.Quota
	if a := q - c - curr; a >= 0 {
		if prev == 0 {
			return 0
		}
		// The estimate decays within this window: prev·(W−e′) ≤ a·W.
		return max(w-a*w/prev-e, 0)
	}
	// Only the next window can, where prev′ = curr > q−c ≥ 0.
	return w - e + w - (q-c)*w/curr
}
