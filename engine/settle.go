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
