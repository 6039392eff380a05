package algorithm

// Log is the sliding window log's state: admitted costs with their times,
// oldest first. The zero Log is empty and ready to use.
type Log struct {
	entries []LogEntry
	total   int64
	window  int64 // µs the entries were admitted under; 0 while unknown
}

// LogEntry is cost N admitted at time At (µs).
type LogEntry struct{ At, N int64 }

// Take decides cost at time now (µs). It drops entries that left the window
// but does not record the request: call Add once every policy of the
// request has admitted it.
func (l *Log) Take(now int64, p Params, cost int64) Result {
	l.rewindow(p.Window)
	l.prune(now - p.Window)
	avail := max(p.Quota-l.total, 0)
	r := Result{Remaining: avail}
	if len(l.entries) > 0 {
		r.ResetAfter = l.entries[0].At + p.Window - now
		r.Expires = l.entries[len(l.entries)-1].At + p.Window
	}
	if l.total > p.Quota { // in debt (a post-charge): the next unit frees later
		r.ResetAfter = l.wait(now, p, 1)
	}
	c := max(cost, 1)
	if c > avail {
		r.RetryAfter = l.wait(now, p, c)
		return r
	}
	r.Allowed = true
	if cost > 0 {
		r.Remaining = avail - cost
		r.Expires = now + p.Window
		if len(l.entries) == 0 { // this request becomes the oldest entry
			r.ResetAfter = p.Window
		}
	}
	return r
}

// wait walks the entries from the oldest until enough leave the window
// for c units to fit.
func (l *Log) wait(now int64, p Params, c int64) int64 {
	need := l.total + c - p.Quota
	for _, e := range l.entries {
		if need -= e.N; need <= 0 {
			return e.At + p.Window - now
		}
	}
	return 0
}

// Add records cost admitted at now under p. A now before the newest entry
// (a clock that stepped back) is recorded at the newest entry's time, which
// keeps the log ordered and errs toward holding quota longer.
func (l *Log) Add(now int64, p Params, cost int64) {
	l.rewindow(p.Window)
	// Post-charges stop the total at 2^53 (doc.go), which also keeps many
	// of them from wrapping it around to a log that admits everything.
	if cost = min(cost, maxExact-l.total); cost <= 0 {
		return
	}
	l.total += cost
	if n := len(l.entries); n > 0 && l.entries[n-1].At >= now {
		l.entries[n-1].N += cost
		return
	}
	l.entries = append(l.entries, LogEntry{At: now, N: cost})
}

// Len returns the number of entries held (entries in the same µs are merged).
func (l *Log) Len() int { return len(l.entries) }

// rewindow makes w the window the entries count in. An entry admitted under
// a window w0 leaves when w0 lets it go, or sooner if w is shorter: under a
// longer window every entry moves back by w − w0, so that it still leaves
// at its time + w0. A lengthened window therefore never holds what was
// spent longer than the window it was spent under. (No entry moves before
// the epoch's first µs, which the Redis store's scores need: for windows
// decades longer than the old, entries then stay a little longer.)
func (l *Log) rewindow(w int64) {
	if l.window != 0 && w > l.window && len(l.entries) > 0 {
		d := min(w-l.window, l.entries[0].At-1)
		for i := range l.entries {
			l.entries[i].At -= d
		}
	}
	l.window = w
}

// prune drops entries at or before cutoff, reusing the slice's storage.
func (l *Log) prune(cutoff int64) {
	i := 0
	for i < len(l.entries) && l.entries[i].At <= cutoff {
		l.total -= l.entries[i].N
		i++
	}
	if i > 0 {
		l.entries = l.entries[:copy(l.entries, l.entries[i:])]
	}
}
