package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
)

// hookCtx runs hook on its n-th call of Err.
type hookCtx struct {
	context.Context
	calls, n int
	hook     func()
}

func (c *hookCtx) Err() error {
	c.calls++
	if c.calls == c.n {
		c.hook()
	}
	return c.Context.Err()
}

// TestWaitTimerNotStoppedAfterPooling: a caller whose request failed puts
// the request back in the pool before it returns; the timer kept with the
// request must not be touched after that, since the next caller to get the
// request from the pool arms it for its own wait. An error reply
// (WRONGTYPE: the key holds a hash) takes wait through its error path, on
// an executor (the client does not honour context deadlines, so no call
// runs inline). The second Err of the caller's context is unavailable's,
// after the request was pooled: there the test takes the request back from
// the pool, as the next caller would, and arms its timer; once the failed
// Take has returned, the timer must still be running.
func TestWaitTimerNotStoppedAfterPooling(t *testing.T) {
	rdb := standaloneClient(t)
	s := newTestStore(t, rdb)
	if s.inline {
		t.Fatal("store runs calls inline; the test needs the executor path")
	}
	p := []floodgate.Policy{{Name: "tm", Algorithm: floodgate.TokenBucket, Quota: 10, Window: time.Second}}
	rk := redisKey(s.prefix, tag("k", s.maxKeyLen), &p[0])
	bg := context.Background()
	if err := rdb.HSet(bg, rk, "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(bg, rk, time.Minute)
	res := make([]floodgate.Result, 1)
	armed, stopped := 0, 0
	for range 50 {
		var got *request
		ctx := &hookCtx{Context: bg, n: 2, hook: func() {
			got = requestPool.Get().(*request)
			if got.timer != nil {
				got.timer.Reset(time.Hour) // as the next caller's wait would
			}
		}}
		if err := s.Take(ctx, "k", one, p, res); err == nil {
			t.Fatal("Take on a hash: no error")
		}
		if got == nil {
			t.Fatal("the hook did not run: wait's error path changed, adjust the test")
		}
		if got.timer != nil {
			armed++
			if !got.timer.Stop() {
				stopped++
			}
		}
		requestPool.Put(got)
	}
	if armed == 0 {
		t.Fatal("no pooled request had a timer: the pool never returned the failed caller's request")
	}
	if stopped > 0 {
		t.Errorf("%d of %d timers armed after the failed caller pooled its request were stopped by that caller", stopped, armed)
	}
}
