package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate/floodgate"
)

// Settle charges an admitted request's actual cost once its work is done
// (a token count the answer reports): in each unit, what exceeds charged,
// the cost it was admitted with, as a post-charge (counted even past the
// quota, leaving the key in debt, floodgate.PostCharge), or the difference back as a refund of
// the cost admitted at time at, on the rate policies it was decided
// against (the rule's and the plan's, each under its key). One store call
// per set, two when one unit is over and the other under. It holds no slot
// and reports no Event.
//
// Errors: floodgate.ErrInvalidCost for a negative actual cost, and the
// store's (floodgate.ErrStoreUnavailable under FailClosed).
func (o *Outcome) Settle(ctx context.Context, charged, actual floodgate.Cost, at time.Time) error {
	if actual.Requests < 0 || actual.ContentBytes < 0 {
		return fmt.Errorf("%w: actual cost %d requests, %d content bytes", floodgate.ErrInvalidCost, actual.Requests, actual.ContentBytes)
	}
	post := floodgate.PostCharge(charged, actual)
	back := floodgate.Cost{Requests: max(charged.Requests-actual.Requests, 0), ContentBytes: max(charged.ContentBytes-actual.ContentBytes, 0), Kind: floodgate.Refund, At: at}
	for _, sp := range o.spent {
		if sp.s == nil || sp.s.limiter == nil {
			continue
		}
		for _, c := range [2]floodgate.Cost{post, back} {
			if c.Requests == 0 && c.ContentBytes == 0 {
				continue
			}
			if _, err := sp.s.limiter.TakeCost(ctx, sp.key, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// Post counts cost on the rule's own rate policies for key whatever is
// left (as a floodgate.Post of at most floodgate.MaxPost in each unit): a
// cost reported once the work is done, such as the tokens an answer
// used, which a key past its quota then owes as debt. It takes no slot,
// does not ask the Blocker and reports no Event: the request it charges
// was decided before. Its Verdict is Allowed, with each policy's
// standing after the charge, or Unavailable (Err says why) when the store
// fails under FailClosed; under FailOpen the Outcome is Degraded and
// nothing was counted.
func (c *Compiled) Post(ctx context.Context, key string, cost floodgate.Cost) Outcome {
	return c.direct(ctx, key, floodgate.PostCharge(floodgate.Cost{}, cost))
}

// direct asks the rule's own rate policies about key with cost, outside
// the decision path (Peek, Post): no slot, no Blocker, no Event.
func (c *Compiled) direct(ctx context.Context, key string, cost floodgate.Cost) Outcome {
	out := Outcome{Summary: -1}
	if c.static == nil || c.static.limiter == nil {
		return out
	}
	out.Field = c.static.field
	d, err := c.static.limiter.TakeCost(ctx, BoundKey(key), cost)
	if err != nil {
		out.Verdict, out.Err = Unavailable, err
		return out
	}
	out.Degraded = d.Degraded
	out.rates = d.Results
	out.summarize()
	return out
}
