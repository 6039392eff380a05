package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
)

// deadlineCtx has a deadline on the test clock: Wait compares it with the
// Limiter's clock, and the context itself never ends on its own, so no
// test depends on real time passing.
type deadlineCtx struct {
	context.Context
	at time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.at, true }

// spendingClock is a Clock whose every Sleep also lets fn run once the time
// has moved: a competitor spending the quota while a waiter sleeps, or a
// caller giving up.
type spendingClock struct {
	*Clock
	fn func(ctx context.Context)
}

func (c spendingClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := c.Clock.Sleep(ctx, d); err != nil {
		return err
	}
	c.fn(ctx)
	return ctx.Err()
}

// wait checks floodgate.Limiter.Wait over the store, for every algorithm:
// a denied request is admitted after exactly one sleep of its RetryAfter;
// one whose RetryAfter passes the context's deadline is refused at once,
// spending nothing; a cancelled wait returns the context's error; and a
// waiter that finds its quota taken again waits again.
func wait(t *testing.T, newStore NewStore) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			p := []floodgate.Policy{pol("w", a, 2, 10*s, 0)}
			clock := NewClock(Epoch.Add(3 * s))
			// full spends the quota of key and returns the RetryAfter of
			// the denial that follows.
			full := func(l *floodgate.Limiter, key string) time.Duration {
				t.Helper()
				for {
					d, err := l.Take(context.Background(), key, 1)
					if err != nil {
						t.Fatal(err)
					}
					if !d.Allowed {
						return d.RetryAfter
					}
				}
			}
			newLimiter := func(c floodgate.Clock) *floodgate.Limiter {
				l, err := floodgate.NewLimiter(newStore(t, clock.Now), p, floodgate.WithClock(c))
				if err != nil {
					t.Fatal(err)
				}
				return l
			}

			l := newLimiter(clock)
			retry := full(l, "admitted")
			start := clock.Now()
			d, err := l.Wait(deadlineCtx{context.Background(), start.Add(retry + ms)}, "admitted", 1)
			if err != nil || !d.Allowed || clock.Now().Sub(start) != retry {
				t.Fatalf("Wait with the deadline %v after RetryAfter: %+v %v after %v; want admitted after %v", ms, d, err, clock.Now().Sub(start), retry)
			}

			retry = full(l, "deadline")
			start = clock.Now()
			d, err = l.Wait(deadlineCtx{context.Background(), start.Add(retry - ms)}, "deadline", 1)
			if !errors.Is(err, floodgate.ErrWaitExceedsDeadline) || d.Allowed || d.RetryAfter != retry || !clock.Now().Equal(start) {
				t.Fatalf("Wait with the deadline before RetryAfter %v: %+v %v after %v; want refused at once", retry, d, err, clock.Now().Sub(start))
			}
			clock.Advance(retry)
			if d, err := l.Take(context.Background(), "deadline", 1); err != nil || !d.Allowed {
				t.Fatalf("after the refused Wait and RetryAfter: %+v %v; the refusal must have spent nothing", d, err)
			}

			ctx, cancel := context.WithCancel(context.Background())
			l = newLimiter(spendingClock{clock, func(context.Context) { cancel() }})
			full(l, "cancel")
			if d, err := l.Wait(ctx, "cancel", 1); !errors.Is(err, context.Canceled) || d.Allowed {
				t.Fatalf("Wait cancelled during its sleep: %+v %v; want context.Canceled, not admitted", d, err)
			}

			competed := false
			l = newLimiter(spendingClock{clock, func(context.Context) {
				if !competed { // the first wake-up finds the quota taken again
					competed = true
					full(l, "race")
				}
			}})
			retry = full(l, "race")
			start = clock.Now()
			d, err = l.Wait(context.Background(), "race", 1)
			if err != nil || !d.Allowed || clock.Now().Sub(start) <= retry {
				t.Fatalf("Wait losing the first race: %+v %v after %v; want admitted after more than %v", d, err, clock.Now().Sub(start), retry)
			}
		})
	}
}
