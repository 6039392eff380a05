// Package refusallog bounds the log records of refusals (REQUIREMENTS O1)
// for every door: one record per rule and key per interval, counting the
// refusals held back, so that an attack is a few lines, not one per
// request. It is exported for the doors in modules of their own (grpclimit)
// and for a door of your own.
package refusallog

import (
	"sync"
	"time"
)

// DefaultInterval is how often at most one key's refusals of one rule are
// logged when a door's configuration leaves it zero.
const DefaultInterval = 10 * time.Second

// maxKeys bounds the keys a Log remembers: past it, refusals of keys it
// does not hold share one record per interval.
const maxKeys = 10_000

// Log lets one record per rule and key through per interval. It is safe
// for concurrent use.
type Log struct {
	every time.Duration
	now   func() time.Time

	mu    sync.Mutex
	keys  map[string]*refusals
	swept time.Time // the last sweep: at most one per interval
}

type refusals struct {
	last       time.Time
	suppressed int64
}

// New returns a Log of one record per every (0: DefaultInterval; negative:
// a record per refusal), reading the clock now (nil: time.Now).
func New(every time.Duration, now func() time.Time) *Log {
	if every == 0 {
		every = DefaultInterval
	}
	if now == nil {
		now = time.Now
	}
	return &Log{every: every, now: now, keys: map[string]*refusals{}}
}

// Admit reports whether a refusal of rule's key is to be logged, and how
// many were held back since the last record of that key.
func (l *Log) Admit(rule, key string) (suppressed int64, ok bool) {
	if l.every < 0 {
		return 0, true // every refusal is logged
	}
	k := rule + "\x00" + key
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.keys[k]
	if e == nil {
		if len(l.keys) >= maxKeys && now.Sub(l.swept) >= l.every {
			// Once per interval: a flood of new keys on a full map must not
			// walk it under the lock for every refusal.
			l.sweep(now)
			l.swept = now
		}
		if len(l.keys) >= maxKeys {
			k = rule + "\x00" // too many keys at once: one record for the others
			if e = l.keys[k]; e != nil {
				return l.next(e, now)
			}
		}
		l.keys[k] = &refusals{last: now}
		return 0, true
	}
	return l.next(e, now)
}

func (l *Log) next(e *refusals, now time.Time) (int64, bool) {
	if now.Sub(e.last) < l.every {
		e.suppressed++
		return 0, false
	}
	n := e.suppressed
	e.last, e.suppressed = now, 0
	return n, true
}

// sweep forgets the keys whose interval has passed; their held-back
// refusals, if any, go unreported.
func (l *Log) sweep(now time.Time) {
	for k, e := range l.keys {
		if now.Sub(e.last) >= l.every {
			delete(l.keys, k)
		}
	}
}
