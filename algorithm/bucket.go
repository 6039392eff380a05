package algorithm

import "math/bits"

// TokenBucket decides cost at time now (µs) for state *s = (last update,
// debt), writes the decision to *r, and updates *s if it admits a cost.
func TokenBucket(s *State, now int64, p Params, cost int64, r *Result) {
	t := max(now, s.A)                    // a clock that steps back refills nothing
	owed := rescale(s.B, window(s, p), p) // at the last update
	debt := owed
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
		r.Expires = s.A + ceilDiv(owed, p.Quota)
		return
	}
	r.Expires = t + ceilDiv(debt, p.Quota)
	*s = State{A: t, B: debt, W: p.Window}
}

// GCRA decides cost at time now (µs) for state *s, the theoretical arrival
// time TAT = s.A + s.B/s.C µs with s.C the quota the TAT was computed for
// (0 in a state written before it was kept: the current quota), writes the
// decision to *r, and updates *s if it admits a cost.
func GCRA(s *State, now int64, p Params, cost int64, r *Result) {
	*r = Result{}
	debt := bucket(r, gcraDebt(s, now, p), p, cost)
	if !r.Allowed || cost == 0 {
		r.Expires = s.A + b2i(s.B > 0)
		return
	}
	*s = State{A: now + debt/p.Quota, B: debt % p.Quota, C: p.Quota, W: p.Window}
	r.Expires = s.A + b2i(s.B > 0)
}

// gcraDebt is the debt (units × W) that GCRA's state stands for at now.
func gcraDebt(s *State, now int64, p Params) int64 {
	if s.A < now || s.A == now && s.B == 0 {
		return 0
	}
	// The debt in units × W does not depend on the quota, so a TAT kept
	// under another quota keeps its meaning: the units spent.
	q := s.C
	if q == 0 {
		q = p.Quota
	}
	return rescale((s.A-now)*q+s.B, window(s, p), p)
}

// rescale reads debt d, in units × w0 (the window it was written under), in
// the policy's window W: ⌈d·W/w0⌉, the same units owed rounded up to the
// new scale's µs·unit, computed in 128 bits. Rounding up never costs a
// whole unit: a unit is W scaled units, and d·W/w0 reaches a multiple of W
// exactly when d reaches a multiple of w0. A debt of the whole capacity or
// more reads as an empty bucket, so that the product stays within 2^53.
func rescale(d, w0 int64, p Params) int64 {
	if w0 == p.Window || d <= 0 {
		return d
	}
	if d/w0 >= p.Capacity {
		return p.Capacity * p.Window
	}
	hi, lo := bits.Mul64(uint64(d), uint64(p.Window))
	q, rem := bits.Div64(hi, lo, uint64(w0)) // < Capacity·W: no overflow
	return int64(q) + b2i(rem > 0)
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
