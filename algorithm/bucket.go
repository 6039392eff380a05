package algorithm

// TokenBucket decides cost at time now (µs) for state *s = (last update,
// debt), writes the decision to *r, and updates *s if it admits a cost.
func TokenBucket(s *State, now int64, p Params, cost int64, r *Result) {
	t := max(now, s.A) // a clock that steps back refills nothing
	debt := s.B
	if e := t - s.A; e >= ceilDiv(debt, p.Quota) {
		debt = 0
	} else {
		debt -= e * p.Quota
	}
	*r = Result{}
	debt = bucket(r, debt, p, cost)
	if d := t - now; d > 0 { // durations count from t, the last update
		r.ResetAfter += d * b2i(r.ResetAfter > 0)
		r.RetryAfter += d * b2i(r.RetryAfter > 0)
	}
	if !r.Allowed || cost == 0 {
		r.Expires = s.A + ceilDiv(s.B, p.Quota)
		return
	}
	r.Expires = t + ceilDiv(debt, p.Quota)
	*s = State{A: t, B: debt}
}

// GCRA decides cost at time now (µs) for state *s, the theoretical arrival
// time TAT = s.A + s.B/s.C µs with s.C the quota the TAT was computed for
// (0 in a state written before it was kept: the current quota), writes the
// decision to *r, and updates *s if it admits a cost.
func GCRA(s *State, now int64, p Params, cost int64, r *Result) {
	var debt int64
	if s.A > now || s.A == now && s.B > 0 {
		// The debt in units × W does not depend on the quota, so a TAT kept
		// under another quota keeps its meaning: the units spent.
		q := s.C
		if q == 0 {
			q = p.Quota
		}
		debt = (s.A-now)*q + s.B
	}
	*r = Result{}
	debt = bucket(r, debt, p, cost)
	if !r.Allowed || cost == 0 {
		r.Expires = s.A + b2i(s.B > 0)
		return
	}
	*s = State{A: now + debt/p.Quota, B: debt % p.Quota, C: p.Quota}
	r.Expires = s.A + b2i(s.B > 0)
}

// bucket is the arithmetic TokenBucket and GCRA share: given the debt at
// now, it fills the zeroed r for cost and returns the debt after it.
func bucket(r *Result, debt int64, p Params, cost int64) int64 {
	full := p.Capacity * p.Window
	tokens := full - debt // scaled by W
	var avail, frac int64
	if tokens >= p.Window {
		avail, frac = tokens/p.Window, tokens%p.Window
	} else if tokens > 0 {
		frac = tokens // under one unit: no division needed on this busy path
	}
	r.Remaining, r.ResetAfter = avail, nextUnit(debt, full, frac, p)
	c := max(cost, 1)
	if c > avail {
		if c == avail+1 && debt <= full {
			r.RetryAfter = r.ResetAfter // the next unit is exactly what is missing
		} else {
			r.RetryAfter = ceilDiv(debt+c*p.Window-full, p.Quota)
		}
		return debt
	}
	r.Allowed = true
	if cost == 0 {
		return debt
	}
	// Spending whole units leaves the fraction as it was.
	debt += cost * p.Window
	r.Remaining = avail - cost
	r.ResetAfter = nextUnit(debt, full, frac, p)
	return debt
}

// nextUnit is the time (µs) until the token count reaches its next whole
// unit; 0 when the bucket is full. frac is the scaled tokens mod W.
func nextUnit(debt, full, frac int64, p Params) int64 {
	if debt <= 0 {
		return 0
	}
	gap := p.Window - frac
	if debt > full { // overdrawn: the quota was lowered, or GCRA's clock stepped back
		gap = debt - full + p.Window
	}
	return ceilDiv(gap, p.Quota)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
