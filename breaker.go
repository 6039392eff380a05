package floodgate

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"
)

// BreakerState is the state of a Breaker.
type BreakerState int32

const (
	// BreakerClosed: every call asks the store.
	BreakerClosed BreakerState = iota
	// BreakerOpen: calls answer by the failure mode without asking the
	// store, until the cooldown has passed.
	BreakerOpen
	// BreakerHalfOpen: one call, the probe, asks the store; every other
	// answers by the failure mode at once.
	BreakerHalfOpen
)

var breakerStateNames = [...]string{BreakerClosed: "closed", BreakerOpen: "open", BreakerHalfOpen: "half-open"}

// String returns "closed", "open" or "half-open".
func (s BreakerState) String() string { return breakerStateNames[s] }

// Default breaker settings.
const (
	// DefaultBreakerThreshold is how many consecutive store failures open
	// the breaker: one slow call on a busy host is not an outage.
	DefaultBreakerThreshold = 5
	// DefaultBreakerCooldown is how long an open breaker waits before its
	// probe: a dead store costs one call per cooldown, and a store back
	// again is used within about this long.
	DefaultBreakerCooldown = 200 * time.Millisecond
)

// BreakerConfig configures NewBreaker.
type BreakerConfig struct {
	// Threshold is the consecutive failures that open it; default
	// DefaultBreakerThreshold.
	Threshold int
	// Cooldown is how long it stays open before one probe may try the
	// store; default DefaultBreakerCooldown.
	Cooldown time.Duration
	// OnChange, if set, is called once per transition (recovery included),
	// on the goroutine whose call caused it: keep it fast.
	OnChange func(from, to BreakerState)
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Breaker is a circuit breaker in front of a store: after Threshold
// consecutive failed store calls (a batch of requests failing on one call
// is one: StoreCallError) it opens, and calls answer by their failure mode
// without asking the store; after Cooldown exactly one call at a time
// probes the store while the others keep answering at once; the probe's
// success closes it, its failure opens it for another Cooldown. Several
// Limiters over one store may share one (WithBreaker), so an outage is one
// state and one log record per transition. Safe for concurrent use; a
// closed breaker costs an atomic load or two per call.
//
// It is written here rather than taken from sony/gobreaker, whose every
// call takes a mutex twice, even closed, and which reads the wall clock
// only.
type Breaker struct {
	cfg       BreakerConfig
	state     atomic.Int32
	failures  atomic.Int64  // consecutive, while closed
	openUntil atomic.Int64  // unix ns
	lastCall  atomic.Uint64 // the latest store call counted (StoreCallError)
}

// NewBreaker returns a closed Breaker.
func NewBreaker(cfg BreakerConfig) *Breaker {
	if cfg.Threshold <= 0 {
		cfg.Threshold = DefaultBreakerThreshold
	}
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = DefaultBreakerCooldown
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Breaker{cfg: cfg}
}

// State returns the current state.
func (b *Breaker) State() BreakerState { return BreakerState(b.state.Load()) }

// allow reports whether a call may ask the store, and whether it is the
// probe, which must report its end (done).
func (b *Breaker) allow() (ok, probe bool) {
	switch BreakerState(b.state.Load()) {
	case BreakerClosed:
		return true, false
	case BreakerOpen:
		if b.cfg.Now().UnixNano() >= b.openUntil.Load() && b.move(BreakerOpen, BreakerHalfOpen) {
			return true, true
		}
	}
	return false, false
}

// StoreCallError is implemented by a store error that says which store
// call failed (redisstore's): the Breaker counts the requests that rode on
// one call (up to a batch of them, all failing together) as one failure,
// and a failure the store isolates (one Cluster master's, which a breaker
// of that master answers for) as none, so one shard's outage does not fail
// every key.
type StoreCallError interface {
	error
	// StoreCall returns the call's number (calls numbered as they start;
	// 0: unknown) and whether the failure is isolated.
	StoreCall() (id uint64, isolated bool)
}

// counts reports whether a failure with err counts toward opening the
// breaker: once per store call, the first time one of its requests reports
// it, and not at all for an isolated one. A call reported after a later
// one failed is not counted again.
func (b *Breaker) counts(err error) bool {
	var ce StoreCallError
	if !errors.As(err, &ce) {
		return true
	}
	id, isolated := ce.StoreCall()
	if isolated {
		return false
	}
	for {
		last := b.lastCall.Load()
		if id != 0 && id <= last {
			return false
		}
		if id == 0 || b.lastCall.CompareAndSwap(last, id) {
			return true
		}
	}
}

// done records a call's end: err is the store's answer; left says the
// caller's context had ended (ctxend.Err), read once by the caller so that
// the breaker and the answer agree.
func (b *Breaker) done(left, probe bool, err error) {
	failed := err != nil && !errors.Is(err, ErrInvalidCost) && !errors.Is(err, ErrCostExceedsQuota)
	left = failed && left
	if failed && !probe && !left && !b.counts(err) {
		return // counted with its call already, or isolated
	}
	switch {
	case left:
		// The caller left or ran out of time: that says nothing of the
		// store. A probe hands its turn to the next call.
		if probe {
			b.openUntil.Store(0)
			b.move(BreakerHalfOpen, BreakerOpen)
		}
	case probe && failed:
		b.openUntil.Store(b.cfg.Now().Add(b.cfg.Cooldown).UnixNano())
		b.move(BreakerHalfOpen, BreakerOpen)
	case probe:
		b.failures.Store(0)
		b.move(BreakerHalfOpen, BreakerClosed)
	case failed:
		if b.failures.Add(1) >= int64(b.cfg.Threshold) {
			b.openUntil.Store(b.cfg.Now().Add(b.cfg.Cooldown).UnixNano())
			b.move(BreakerClosed, BreakerOpen)
		}
	case b.failures.Load() != 0:
		b.failures.Store(0) // a success ends the run of failures
	}
}

// move changes the state from one to another, reporting whether this call
// made the change.
func (b *Breaker) move(from, to BreakerState) bool {
	if !b.state.CompareAndSwap(int32(from), int32(to)) {
		return false
	}
	if to == BreakerClosed || to == BreakerOpen && from == BreakerClosed {
		b.failures.Store(0)
	}
	if f := b.cfg.OnChange; f != nil {
		f(from, to)
	}
	return true
}

// BreakerLogger returns an OnChange that logs each transition to logger
// (WARN when it opens and when it closes again, INFO for the probes),
// naming the store.
func BreakerLogger(logger *slog.Logger, store string) func(from, to BreakerState) {
	return func(from, to BreakerState) {
		level, msg := slog.LevelInfo, "rate limit store breaker "+to.String()
		switch {
		case to == BreakerOpen && from == BreakerClosed:
			level, msg = slog.LevelWarn, "rate limit store failing: breaker open, the failure mode answers"
		case to == BreakerClosed:
			level, msg = slog.LevelWarn, "rate limit store recovered: breaker closed"
		}
		attrs := []slog.Attr{slog.String("from", from.String()), slog.String("to", to.String())}
		if store != "" {
			attrs = append(attrs, slog.String("store", store))
		}
		logger.LogAttrs(context.Background(), level, msg, attrs...)
	}
}
