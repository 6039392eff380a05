package floodgate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// FailureMode says what a Limiter answers while its store is failing
// (REQUIREMENTS S3). The zero value is FailClosed.
type FailureMode uint8

const (
	// FailClosed denies: Take returns ErrStoreUnavailable and a denied
	// Decision. Protection first; an HTTP layer answers 503, not 429.
	FailClosed FailureMode = iota
	// FailOpen admits every request and marks the Decision Degraded.
	// Availability first.
	FailOpen
	// FailToLocal limits with a local store and each policy's quota scaled
	// by the configured share (e.g. 1/replicas), marking the Decision
	// Degraded. A cost larger than a scaled capacity is denied, with
	// RetryAfter the store retry interval. Set with WithLocalFallback.
	FailToLocal
)

var failureModeNames = [...]string{FailClosed: "fail-closed", FailOpen: "fail-open", FailToLocal: "fail-to-local"}

// String returns "fail-closed", "fail-open" or "fail-to-local".
func (m FailureMode) String() string {
	if int(m) < len(failureModeNames) {
		return failureModeNames[m]
	}
	return fmt.Sprintf("failure-mode(%d)", uint8(m))
}

// ParseFailureMode is the inverse of FailureMode.String.
func ParseFailureMode(s string) (FailureMode, error) {
	for m, name := range failureModeNames {
		if name == s {
			return FailureMode(m), nil
		}
	}
	return 0, fmt.Errorf("floodgate: unknown failure mode %q (want fail-closed, fail-open or fail-to-local)", s)
}

// Limiter applies a fixed set of policies to partition keys through a Store.
// It is safe for concurrent use.
type Limiter struct {
	store    Store
	policies []Policy

	mode          FailureMode
	local         Store
	localPolicies []Policy
	retryStore    time.Duration // how long to skip a failing store before trying it again
	logEvery      time.Duration
	logger        *slog.Logger
	now           func() time.Time

	storeErrors atomic.Uint64
	skipUntil   atomic.Int64 // unix ns; store is not asked before this
	lastLog     atomic.Int64 // unix ns of the last failure log record
}

// Option configures a Limiter.
type Option func(*Limiter)

// WithFailureMode sets what Take answers while the store fails; default
// FailClosed. FailToLocal also needs WithLocalFallback.
func WithFailureMode(m FailureMode) Option { return func(l *Limiter) { l.mode = m } }

// WithLocalFallback sets FailToLocal: while the store fails, decisions come
// from local, with every policy's Quota and Burst multiplied by share
// (0 < share ≤ 1, e.g. 1/replicas), rounded down but at least 1.
func WithLocalFallback(local Store, share float64) Option {
	return func(l *Limiter) {
		l.mode, l.local = FailToLocal, local
		l.localPolicies = make([]Policy, len(l.policies))
		for i, p := range l.policies {
			l.localPolicies[i] = p.Scaled(share)
		}
	}
}

// WithLogger sets where store failures are logged (at most once per
// WithFailureLogInterval); default slog.Default().
func WithLogger(logger *slog.Logger) Option { return func(l *Limiter) { l.logger = logger } }

// WithFailureLogInterval sets the least time between two failure log
// records; default 10 s. Failures are always counted (StoreErrors).
func WithFailureLogInterval(d time.Duration) Option { return func(l *Limiter) { l.logEvery = d } }

// WithStoreRetry sets how long a failed store is skipped (the failure mode
// answers at once) before the next call tries it again; default 200 ms.
// This keeps a dead store from adding its timeout to every request, and
// recovery needs no action.
func WithStoreRetry(d time.Duration) Option { return func(l *Limiter) { l.retryStore = d } }

// NewLimiter returns a Limiter for the given policies, which must pass
// ValidatePolicies (the error wraps ErrInvalidPolicy).
func NewLimiter(store Store, policies []Policy, opts ...Option) (*Limiter, error) {
	if err := ValidatePolicies(policies); err != nil {
		return nil, err
	}
	l := &Limiter{
		store:      store,
		policies:   append([]Policy(nil), policies...),
		retryStore: 200 * time.Millisecond,
		logEvery:   10 * time.Second,
		logger:     slog.Default(),
		now:        time.Now,
	}
	for _, o := range opts {
		o(l)
	}
	if l.mode == FailToLocal && l.local == nil {
		return nil, errors.New("floodgate: fail-to-local needs WithLocalFallback")
	}
	return l, nil
}

// Policies returns a copy of the limiter's policies.
func (l *Limiter) Policies() []Policy { return append([]Policy(nil), l.policies...) }

// StoreErrors returns how many calls found the store failing.
func (l *Limiter) StoreErrors() uint64 { return l.storeErrors.Load() }

// Take spends cost from every policy for key, each in its own unit, all
// or nothing, and returns the Decision. Cost 0 is a peek. It is
// TakeCost with cost in every unit.
func (l *Limiter) Take(ctx context.Context, key string, cost int64) (Decision, error) {
	return l.TakeCost(ctx, key, Cost{Requests: cost, ContentBytes: cost})
}

// TakeCost spends cost from every policy for key, each policy the part of
// cost in its own unit (a request's count from Requests policies, its body
// size from ContentBytes ones), all or nothing, and returns the Decision.
// The zero Cost is a peek.
//
// Errors: ErrInvalidCost and ErrCostExceedsQuota for a cost that can never
// pass; with FailClosed, ErrStoreUnavailable (wrapping the cause) while the
// store fails, together with a denied Decision. With FailOpen and
// FailToLocal, store failures give a Degraded Decision and no error. The
// caller's ctx errors are returned as they are, whatever the mode.
func (l *Limiter) TakeCost(ctx context.Context, key string, cost Cost) (Decision, error) {
	d := Decision{Results: make([]Result, len(l.policies))}
	// The store checks too, but a failure mode answering in its place must
	// not admit a cost that could never pass.
	if err := CheckCost(cost, l.policies); err != nil {
		return d, err
	}
	var err error
	skip := l.skipUntil.Load()
	if skip != 0 && l.now().UnixNano() < skip {
		err = errSkipped
	} else {
		err = l.store.Take(ctx, key, cost, l.policies, d.Results)
	}
	if err != nil {
		if ctx.Err() != nil {
			return d, ctx.Err()
		}
		return l.fail(ctx, key, cost, d, err)
	}
	if skip != 0 {
		l.skipUntil.CompareAndSwap(skip, 0) // recovered: no clock read per call from here on
	}
	l.finish(&d, l.policies)
	return d, nil
}

// errSkipped stands for the last store failure while the store is skipped.
var errSkipped = fmt.Errorf("%w: skipped after a recent failure", ErrStoreUnavailable)

func (l *Limiter) fail(ctx context.Context, key string, cost Cost, d Decision, cause error) (Decision, error) {
	if !errors.Is(cause, ErrStoreUnavailable) {
		cause = fmt.Errorf("%w: %w", ErrStoreUnavailable, cause)
	}
	l.storeErrors.Add(1)
	now := l.now().UnixNano()
	if cause != errSkipped {
		l.skipUntil.Store(now + int64(l.retryStore))
	}
	if last := l.lastLog.Load(); now-last >= int64(l.logEvery) && l.lastLog.CompareAndSwap(last, now) {
		l.logger.LogAttrs(ctx, slog.LevelError, "rate limit store failing",
			slog.String("mode", l.mode.String()), slog.Uint64("errors_total", l.storeErrors.Load()), slog.Any("error", cause))
	}
	switch l.mode {
	case FailOpen:
		for i, p := range l.policies {
			d.Results[i] = Result{Allowed: true, Remaining: p.Capacity()}
		}
		l.finish(&d, l.policies)
		d.Degraded = true
		return d, nil
	case FailToLocal:
		err := l.local.Take(ctx, key, cost, l.localPolicies, d.Results)
		if errors.Is(err, ErrCostExceedsQuota) {
			// The cost fits the policies (checked above), only not this
			// instance's share of them: refuse it until the store may be
			// back, rather than call it impossible.
			for i := range d.Results {
				d.Results[i] = Result{RetryAfter: l.retryStore, ResetAfter: l.retryStore}
			}
			err = nil
		}
		if err != nil {
			return d, err
		}
		l.finish(&d, l.localPolicies)
		d.Degraded = true
		return d, nil
	default:
		for i, p := range l.policies {
			d.Results[i] = Result{Policy: p}
		}
		d.Policy = l.policies[0]
		return d, cause
	}
}

func (l *Limiter) finish(d *Decision, policies []Policy) {
	for i := range d.Results {
		d.Results[i].Policy = policies[i]
	}
	d.summarize()
}

// Reset forgets key's state under the limiter's policies (and in the local
// fallback store, if any).
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if l.local != nil {
		if err := l.local.Reset(ctx, key, l.localPolicies); err != nil {
			return err
		}
	}
	return l.store.Reset(ctx, key, l.policies)
}
