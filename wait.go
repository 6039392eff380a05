package floodgate

import (
	"context"
	"fmt"
	"time"
)

// minPause is the shortest sleep between two tries of Wait, so that a
// denial without a RetryAfter (a store-retry interval of 0) cannot spin.
const minPause = time.Millisecond

// Wait spends cost from every policy for key as Take does, but when the
// request is denied it sleeps for the Decision's RetryAfter and tries
// again, until the request is admitted or ctx ends; it is for work that
// should go slower rather than fail, such as a worker calling another
// service's API. A cost of 0 is a peek, answered at once.
//
// When ctx has a deadline before which the request cannot be admitted
// (now + RetryAfter is not before it), Wait does not sleep in vain: it
// returns at once the denied Decision, whose RetryAfter says when to come
// back, and an error wrapping ErrWaitExceedsDeadline. As RetryAfter holds
// only if nothing else is spent meanwhile, waiters are not queued: of
// several waiting for one key (in this process or another sharing the
// store), one that finds the quota taken again when it wakes waits again.
//
// Errors: those of Take, returned at once (ErrInvalidCost,
// ErrCostExceedsQuota, and ErrStoreUnavailable under FailClosed);
// ErrWaitExceedsDeadline as above; ctx.Err() when ctx ends during the
// wait, with the last denied Decision. Reserve is not a promise of quota
// for later either: it admits an estimate now, to be settled.
func (l *Limiter) Wait(ctx context.Context, key string, cost int64) (Decision, error) {
	c := Cost{Requests: cost, ContentBytes: cost}
	for {
		d, err := l.TakeCost(ctx, key, c)
		if err != nil || d.Allowed || c.IsPeek() {
			return d, err
		}
		pause := max(d.RetryAfter, minPause)
		if deadline, ok := ctx.Deadline(); ok && !l.now().Add(pause).Before(deadline) {
			return d, fmt.Errorf("%w: admitted in %v at the earliest", ErrWaitExceedsDeadline, d.RetryAfter)
		}
		if err := l.sleep(ctx, pause); err != nil {
			return d, err
		}
	}
}
