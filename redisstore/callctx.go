package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// callCtx is the context of a call run on its caller's goroutine (see
// batcher.submit), as context.WithTimeout would make it: the caller's
// values, a deadline the per-call timeout away, and done at that deadline
// or when the caller's context ends, whichever is first. WithTimeout costs
// five allocations and a new timer per call (0.6–0.9 µs here, a few per
// cent of a call); a callCtx costs two, and the Store's one inlineTimer,
// reset for each call, stands for the timers, since at most one call runs
// inline at a time.
type callCtx struct {
	context.Context // the caller's, for Value
	deadline        time.Time
	done            chan struct{}
	stopParent      func() bool // ends the watch on the caller's Done, if any

	mu  sync.Mutex
	err error
}

func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *callCtx) Done() <-chan struct{}       { return c.done }

func (c *callCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// end makes c done with err, unless it is already.
func (c *callCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
}

// inlineTimer ends each inline call's context at its deadline. Its
// methods other than expire are called by one goroutine at a time: the one
// the batcher lets run inline.
type inlineTimer struct {
	t   *time.Timer
	cur atomic.Pointer[callCtx] // the call in progress, or nil
}

// start returns the context of a call under parent bounded by timeout,
// to be passed to finish when the call ends. A parent whose own deadline
// comes first is returned as it is: it already ends the call in time.
func (it *inlineTimer) start(parent context.Context, timeout time.Duration) context.Context {
	deadline := time.Now().Add(timeout)
	if d, ok := parent.Deadline(); ok && !d.After(deadline) {
		return parent
	}
	c := &callCtx{Context: parent, deadline: deadline, done: make(chan struct{})}
	if parent.Done() != nil {
		c.stopParent = context.AfterFunc(parent, func() { c.end(parent.Err()) })
	}
	it.cur.Store(c)
	if it.t == nil {
		it.t = time.AfterFunc(timeout, it.expire)
	} else {
		it.t.Reset(timeout)
	}
	return c
}

// finish ends the call start returned ctx for, as the cancel function of
// context.WithTimeout would: ctx is done with context.Canceled if it was
// not yet.
func (it *inlineTimer) finish(ctx context.Context) {
	c := it.cur.Load()
	if c == nil || context.Context(c) != ctx {
		return // start returned the caller's own context
	}
	it.cur.Store(nil)
	it.t.Stop()
	if c.stopParent != nil {
		c.stopParent()
	}
	c.end(context.Canceled)
}

// expire ends the call in progress if its deadline has passed; a firing
// meant for an earlier call, which can run late, finds a later deadline or
// no call and does nothing.
func (it *inlineTimer) expire() {
	if c := it.cur.Load(); c != nil && !time.Now().Before(c.deadline) {
		c.end(context.DeadlineExceeded)
	}
}
