package engine

import (
	"context"
	"sync"
	"time"

	"github.com/floodgate/floodgate"
)

// queues holds the throttle waiters of a rule, one line per key.
type queues struct {
	mu sync.Mutex
	m  map[string]*line
}

// line is one key's throttle queue. Waiters are given turns in arrival
// order, each one spacing after the last: tail is the turn of the last
// waiter in line, n how many wait.
type line struct {
	tail time.Time
	n    int
}

// take asks l for key; under Throttle, a denied request — or one that
// finds others already waiting for its key — gets in line: its turn is
// when its cost fits, and not before the last waiter's turn plus the time
// the policies take to refill this cost. A request whose turn is past
// MaxDelay from its arrival is refused at once, with the wait for its turn
// as its RetryAfter; one whose context ends while waiting is refused.
func (c *Compiled) take(ctx context.Context, out *Outcome, l *floodgate.Limiter, key string, cost floodgate.Cost) (floodgate.Decision, error) {
	if c.mode != Throttle {
		return l.TakeCost(ctx, key, cost)
	}
	clock := c.e.clock
	arrived := clock.Now()
	var d floodgate.Decision
	var err error
	if c.queues.waiting(key, arrived) {
		// Others wait for this key: it goes behind them, so it only asks
		// where the key stands, spending nothing.
		d, err = l.TakeCost(ctx, key, floodgate.Cost{})
		d.Allowed = false
	} else {
		d, err = l.TakeCost(ctx, key, cost)
	}
	if err != nil || d.Allowed {
		return d, err
	}
	spacing := refill(l.Policies(), cost)
	deadline := arrived.Add(c.maxDelay)
	now := clock.Now()
	turn, ok := c.queues.join(key, now, now.Add(d.RetryAfter), spacing, deadline)
	for inLine := true; ; inLine = false {
		if !ok {
			out.RetryAfter = max(out.RetryAfter, turn.Sub(now))
			return d, nil
		}
		out.Waits++
		err := clock.Sleep(ctx, turn.Sub(now))
		if inLine {
			c.queues.leave(key)
		}
		if err != nil {
			return d, nil // the wait ended early: refused, with the standing last seen
		}
		next, err := l.TakeCost(ctx, key, cost)
		if err != nil || next.Allowed {
			return next, err
		}
		// Denied at its turn (a clock a little behind, or a request that
		// came in first): it is at the head of the line now, so it waits
		// only until it fits, not behind the others again.
		d, now = next, clock.Now()
		turn = now.Add(d.RetryAfter)
		ok = !turn.After(deadline)
	}
}

// refill is how long the policies take to give back cost: the longest,
// over the policies charged, of cost × window / quota.
func refill(policies []floodgate.Policy, cost floodgate.Cost) time.Duration {
	var d time.Duration
	for _, p := range policies {
		if n := cost.Of(p.Unit); n > 0 {
			d = max(d, time.Duration(int64(p.Window)/p.Quota*n))
		}
	}
	return d
}

// waiting reports whether key has waiters whose turns are still to come.
func (q *queues) waiting(key string, now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	ln := q.m[key]
	return ln != nil && (ln.n > 0 || ln.tail.After(now))
}

// join gives the caller a turn: at the earliest fit, and at least spacing
// after the last waiter's turn. It refuses (false) a turn past deadline,
// returning the turn it would have had.
func (q *queues) join(key string, now, fit time.Time, spacing time.Duration, deadline time.Time) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m == nil {
		q.m = make(map[string]*line)
	}
	ln := q.m[key]
	turn := fit
	if ln != nil && (ln.n > 0 || ln.tail.After(now)) {
		turn = maxTime(turn, ln.tail.Add(spacing))
	}
	if turn.After(deadline) {
		return turn, false
	}
	if ln == nil {
		ln = &line{}
		q.m[key] = ln
	}
	ln.tail, ln.n = turn, ln.n+1
	return turn, true
}

// leave ends a wait; a line with no waiters left goes.
func (q *queues) leave(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if ln := q.m[key]; ln != nil {
		if ln.n--; ln.n <= 0 {
			delete(q.m, key)
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
