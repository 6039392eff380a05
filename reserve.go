package floodgate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/floodgate/floodgate/internal/ctxend"
)

// DefaultSettleWithin is how long a Reservation may be settled by
// default (WithSettleWithin): past it, the reservation counts at its
// estimate for good.
const DefaultSettleWithin = 10 * time.Minute

// ErrReservationClosed is returned by Settle and Cancel on a reservation
// that was refused, already settled or cancelled, or not settled within
// the Limiter's settle time: nothing more is charged or given back.
var ErrReservationClosed = errors.New("floodgate: reservation refused, settled or expired")

// WithSettleWithin sets how long after Reserve a Reservation may be
// settled (> 0); default DefaultSettleWithin. A reservation not settled in
// time keeps its estimate charged: the work it paid for is taken to have
// cost that.
func WithSettleWithin(d time.Duration) Option { return func(c *config) { c.settleWithin = d } }

// Reservation is quota admitted against an estimate, to be settled with
// the actual cost once the work is done (Limiter.Reserve). It is safe for
// concurrent use; only its first Settle or Cancel counts.
type Reservation struct {
	// Decision is Reserve's: whether the estimate was admitted, with the
	// fields a response reports.
	Decision Decision

	l        *Limiter
	key      string
	estimate Cost
	at       time.Time // the Limiter's clock at Reserve: the refund's Cost.At
	mu       sync.Mutex
	closed   bool
}

// Reserve admits estimate for key as TakeCost does (all or nothing), and
// returns a Reservation to settle with the actual cost. A refused estimate
// gives a Reservation whose Decision is denied and which cannot be
// settled. One store call.
//
// Errors: those of TakeCost; ErrInvalidCost for an estimate whose Kind is
// not Admit.
func (l *Limiter) Reserve(ctx context.Context, key string, estimate Cost) (*Reservation, error) {
	if estimate.Kind != Admit {
		return nil, fmt.Errorf("%w: a reservation's estimate is admitted, not a %d", ErrInvalidCost, estimate.Kind)
	}
	r := &Reservation{l: l, key: key, estimate: estimate, at: l.now()}
	d, err := l.TakeCost(ctx, key, estimate)
	r.Decision, r.closed = d, err != nil || !d.Allowed || d.Degraded
	return r, err
}

// Settle charges the reservation's actual cost: the excess over the
// estimate as a post-charge (counted even past the quota, leaving the key
// in debt), or the difference back as a refund, in each unit. It is one
// store call, none when actual equals the estimate, two when one unit is
// over its estimate and the other under. The Decision reports each
// policy's standing after it (the last call's, when two).
//
// Errors: ErrReservationClosed after an earlier Settle or Cancel, for a
// refused or degraded reservation, and past the Limiter's settle time
// (WithSettleWithin), when the estimate stays charged; ErrInvalidCost for
// a negative actual cost; the store's errors as TakeCost's, whatever the
// failure mode (a settlement answered by no store is lost, not guessed).
func (r *Reservation) Settle(ctx context.Context, actual Cost) (Decision, error) {
	if actual.Requests < 0 || actual.ContentBytes < 0 {
		return Decision{}, fmt.Errorf("%w: actual cost %d requests, %d content bytes", ErrInvalidCost, actual.Requests, actual.ContentBytes)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.l.now().Sub(r.at) > r.l.settleWithin {
		return Decision{}, ErrReservationClosed
	}
	r.closed = true
	post := PostCharge(r.estimate, actual)
	back := Cost{Requests: max(r.estimate.Requests-actual.Requests, 0), ContentBytes: max(r.estimate.ContentBytes-actual.ContentBytes, 0), Kind: Refund, At: r.at}
	d := r.Decision
	var err error
	if !post.isZero() {
		d, err = r.l.settle(ctx, r.key, post)
	}
	if err == nil && !back.isZero() {
		d, err = r.l.settle(ctx, r.key, back)
	}
	return d, err
}

// Cancel gives the whole estimate back: the work did not run. It is
// Settle with a zero actual cost.
func (r *Reservation) Cancel(ctx context.Context) error {
	_, err := r.Settle(ctx, Cost{})
	return err
}

// PostCharge is what actual costs beyond charged, in each unit, as a Post
// of at most MaxPost: a larger actual cost (an upstream's cost header
// saying 2^63−1) leaves the most debt a key can hold rather than an
// ErrInvalidCost that would charge nothing at all.
func PostCharge(charged, actual Cost) Cost {
	return Cost{Requests: min(max(actual.Requests-charged.Requests, 0), MaxPost),
		ContentBytes: min(max(actual.ContentBytes-charged.ContentBytes, 0), MaxPost), Kind: Post}
}

// isZero reports whether c charges nothing in any unit.
func (c Cost) isZero() bool { return c.Requests == 0 && c.ContentBytes == 0 }

// settle sends a Post or Refund to the store: never answered by a failure
// mode, since neither decides anything a request waits for.
func (l *Limiter) settle(ctx context.Context, key string, cost Cost) (Decision, error) {
	d := Decision{Results: make([]Result, len(l.policies))}
	if err := l.store.Take(ctx, key, cost, l.policies, d.Results); err != nil {
		if ctxend.Err(ctx) == nil && !errors.Is(err, ErrStoreUnavailable) && !errors.Is(err, ErrInvalidCost) && !errors.Is(err, ErrCostExceedsQuota) {
			err = fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
		}
		return d, err
	}
	l.finish(&d, l.policies)
	return d, nil
}
