package algorithm

// maxExact is 2^53, where Lua numbers (the Redis store's) stop being exact
// integers: a post-charge never takes a count or a debt beyond it.
const maxExact = 1 << 53

// PostFixedWindow adds cost to the count of the window at now, whatever
// the quota (a post-charge): a count past the quota refuses the rest of
// the window. The count stops at 2^53.
func PostFixedWindow(s *State, now int64, p Params, cost int64) {
	start := windowStart(now, p)
	var count int64
	if window(s, p) == p.Window {
		start = max(start, s.A)
		if s.A == start {
			count = s.B
		}
	}
	*s = State{A: start, B: min(count+cost, maxExact), W: p.Window}
}

// RefundFixedWindow gives n back to the window that held time at, if the
// state still counts it (its window, of its own length, holds at); never
// below 0.
func RefundFixedWindow(s *State, at int64, p Params, n int64) {
	if s.A <= at && at < s.A+window(s, p) {
		s.B = max(s.B-n, 0)
	}
}

// PostSlidingWindowCounter adds cost to the current window's count,
// whatever the quota. A count past the quota weighs into the next window
// as any count does, so the debt is repaid within two windows. The count
// stops at ⌊2^53/W⌋, which keeps count·W exact.
func PostSlidingWindowCounter(s *State, now int64, p Params, cost int64) {
	start, curr, prev := counters(s, now, p)
	*s = State{A: start, B: min(curr+min(cost, maxExact), maxExact/p.Window), C: prev, W: p.Window}
}

// RefundSlidingWindowCounter gives n back to the counter of the window
// that held time at: the current one, or the previous one once the
// window has turned; never below 0.
func RefundSlidingWindowCounter(s *State, at int64, p Params, n int64) {
	if window(s, p) != p.Window {
		return
	}
	switch start := at - at%p.Window; s.A {
	case start:
		s.B = max(s.B-n, 0)
	case start + p.Window:
		s.C = max(s.C-n, 0)
	}
}

// PostTokenBucket adds cost to the bucket's debt at now, whatever the
// tokens left: a debt past the capacity refuses until refill has paid it
// back to one whole unit.
func PostTokenBucket(s *State, now int64, p Params, cost int64) {
	t := max(now, s.A)
	debt := rescale(s.B, window(s, p), p)
	if e := t - s.A; e >= ceilDiv(debt, p.Quota) {
		debt = 0
	} else {
		debt -= e * p.Quota
	}
	*s = State{A: t, B: owe(debt, cost, p), W: p.Window}
}

// RefundTokenBucket takes n units off the debt, never below a full
// bucket. The debt decays from the last update whatever it is, so the
// refund needs no time.
func RefundTokenBucket(s *State, p Params, n int64) {
	s.B, s.W = max(s.B-n*window(s, p), 0), window(s, p)
}

// PostGCRA moves the theoretical arrival time on by cost, whatever the
// tolerance: as PostTokenBucket.
func PostGCRA(s *State, now int64, p Params, cost int64) {
	debt := owe(gcraDebt(s, now, p), cost, p)
	*s = State{A: now + debt/p.Quota, B: debt % p.Quota, C: p.Quota, W: p.Window}
}

// RefundGCRA moves the theoretical arrival time back by n units. A TAT
// before now is a full bucket, so it needs no floor.
func RefundGCRA(s *State, p Params, n int64) {
	if s.A == 0 && s.B == 0 {
		return
	}
	q := s.C
	if q == 0 {
		q = p.Quota
	}
	k := n * window(s, p) // units × W, as the debt
	s.C, s.W = q, window(s, p)
	s.A -= k / q
	if s.B -= k % q; s.B < 0 {
		s.A, s.B = s.A-1, s.B+q
	}
}

// owe adds cost units to debt (scaled by W), up to 2^53 − Q (or an empty
// bucket, if that is more): the most a Lua number holds exactly while the
// waits below add Q to it.
func owe(debt, cost int64, p Params) int64 {
	limit := max(maxExact-p.Quota, p.Capacity*p.Window)
	if room := limit - debt; room <= 0 || cost >= ceilDiv(room, p.Window) {
		return max(debt, limit)
	}
	return debt + cost*p.Window
}

// Post records cost at now whatever the quota: Take (for the pruning) and
// Add in one.
func (l *Log) Post(now int64, p Params, cost int64) {
	l.Take(now, p, 0)
	l.Add(now, p, cost)
}

// Refund gives n back from the entries admitted at or after at, the
// newest first; never more than they hold.
func (l *Log) Refund(at, n int64) {
	i := len(l.entries) - 1
	for ; i >= 0 && n > 0 && l.entries[i].At >= at; i-- {
		d := min(n, l.entries[i].N)
		l.entries[i].N -= d
		l.total -= d
		n -= d
	}
	kept := l.entries[:0]
	for _, e := range l.entries {
		if e.N > 0 {
			kept = append(kept, e)
		}
	}
	l.entries = kept
}
