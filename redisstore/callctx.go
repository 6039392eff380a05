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
// five allocations and a new timer per call (0.55–0.95 µs here, a few per
// cent of a call); a callCtx costs two, and the Store's one inlineTimer
// stands for the timers, since at most one call runs inline at a time.
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

// inlineTimer ends each inline call's context at its deadline, with one
// timer that is not reset per call: once armed, it fires at the deadline of
// the call then in progress or earlier, and then re-arms itself for the
// deadline of the call it finds, or disarms when it finds none. Each
// deadline is the same timeout after its call's start, so a timer armed for
// an earlier call never fires after a later call's deadline. Its methods
// other than expire are called by one goroutine at a time: the one the
// batcher lets run inline.
type inlineTimer struct {
	t     *time.Timer
	armed atomic.Bool
	cur   atomic.Pointer[callCtx] // the call in progress, or nil
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
	if it.t == nil {
		it.t = time.AfterFunc(time.Hour, it.expire)
		it.t.Stop() // armed below
	}
	it.cur.Store(c)
	it.arm(timeout)
	return c
}

// arm sets the timer to fire after d, unless it is armed already.
func (it *inlineTimer) arm(d time.Duration) {
	if it.armed.CompareAndSwap(false, true) {
		it.t.Reset(d)
	}
}

// finish ends the call start returned ctx for, as the cancel function of
// context.WithTimeout would: ctx is done with context.Canceled if it was
// not yet. The timer is left to find no call.
func (it *inlineTimer) finish(ctx context.Context) {
	c := it.cur.Load()
	if c == nil || context.Context(c) != ctx {
		return // start returned the caller's own context
	}
	it.cur.Store(nil)
	if c.stopParent != nil {
		c.stopParent()
	}
	c.end(context.Canceled)
}

// expire ends the call in progress if its deadline has passed, or waits
// for it if not; with no call left to wait for it disarms, then arms again
// for a call that started meanwhile, which found it armed.
func (it *inlineTimer) expire() {
	c := it.cur.Load()
	if c != nil {
		if wait := time.Until(c.deadline); wait > 0 {
			it.t.Reset(wait)
			return
		}
		c.end(context.DeadlineExceeded)
	}
	it.armed.Store(false)
	if next := it.cur.Load(); next != nil && next != c {
		it.arm(time.Until(next.deadline))
	}
}
