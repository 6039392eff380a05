package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

// TestInlineTimer: the context of an inline call behaves as one from
// context.WithTimeout: the caller's values, a deadline the timeout away,
// done with DeadlineExceeded once it passes, with the caller's error when
// the caller's context ends first, and with Canceled when the call
// finishes. A caller's own earlier deadline is kept as it is.
func TestInlineTimer(t *testing.T) {
	var it inlineTimer
	parent := context.WithValue(context.Background(), ctxKey{}, "v")

	before := time.Now()
	ctx := it.start(parent, 20*time.Millisecond)
	if d, ok := ctx.Deadline(); !ok || d.Before(before.Add(20*time.Millisecond)) || d.After(time.Now().Add(20*time.Millisecond)) {
		t.Errorf("deadline %v (%v), want 20ms after the start", d, ok)
	}
	if ctx.Value(ctxKey{}) != "v" || ctx.Err() != nil {
		t.Errorf("value %v, err %v; want the caller's value and no error", ctx.Value(ctxKey{}), ctx.Err())
	}
	waitDone(t, ctx)
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || time.Now().Before(before.Add(20*time.Millisecond)) {
		t.Errorf("done with %v after %v, want DeadlineExceeded after 20ms", ctx.Err(), time.Since(before))
	}
	it.finish(ctx)
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("finish changed the error to %v", ctx.Err())
	}

	cancellable, cancel := context.WithCancel(parent)
	ctx = it.start(cancellable, time.Hour)
	cancel()
	waitDone(t, ctx)
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("after the caller's cancel: %v, want Canceled", ctx.Err())
	}
	it.finish(ctx)

	ctx = it.start(parent, time.Hour)
	it.finish(ctx)
	waitDone(t, ctx)
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("after finish: %v, want Canceled", ctx.Err())
	}

	short, cancel := context.WithTimeout(parent, time.Millisecond)
	defer cancel()
	if ctx := it.start(short, time.Hour); ctx != short {
		t.Errorf("a caller's earlier deadline: got a new context %v", ctx)
	}
}

// TestInlineTimerStaleFiring: a timer firing meant for a finished call
// (which can run late, after the next call began) leaves the next call
// alone.
func TestInlineTimerStaleFiring(t *testing.T) {
	var it inlineTimer
	first := it.start(context.Background(), time.Millisecond)
	it.finish(first)
	next := it.start(context.Background(), time.Hour)
	defer it.finish(next)
	it.expire() // as the first call's firing, run late
	time.Sleep(20 * time.Millisecond)
	if err := next.Err(); err != nil {
		t.Fatalf("the next call ended with %v", err)
	}
}

// TestInlineTimerRearms: the one timer ends each call at its own deadline,
// never before, whether it was armed for an earlier call (finished in
// time) or had disarmed after finding no call.
func TestInlineTimerRearms(t *testing.T) {
	var it inlineTimer
	const timeout = 30 * time.Millisecond
	for round := range 2 {
		first := it.start(context.Background(), timeout)
		it.finish(first)
		time.Sleep(5 * time.Millisecond)
		late := it.start(context.Background(), timeout)
		deadline, _ := late.Deadline()
		waitDone(t, late)
		if now := time.Now(); !errors.Is(late.Err(), context.DeadlineExceeded) || now.Before(deadline) {
			t.Fatalf("round %d: done with %v, %v before its deadline", round, late.Err(), deadline.Sub(now))
		}
		it.finish(late)
		time.Sleep(3 * timeout) // the timer finds no call and disarms
	}
}

func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("context not done after 10s")
	}
}
