package floodgate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/internal/ctxend"
	"github.com/floodgate/floodgate/internal/nilcheck"
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

// MarshalText implements encoding.TextMarshaler.
func (m FailureMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseFailureMode.
func (m *FailureMode) UnmarshalText(b []byte) error {
	v, err := ParseFailureMode(string(b))
	*m = v
	return err
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
	breaker       *Breaker
	logEvery      time.Duration
	logger        *slog.Logger
	now           func() time.Time
	settleWithin  time.Duration
	sleep         func(context.Context, time.Duration) error

	storeErrors atomic.Uint64
	lastLog     atomic.Int64 // unix ns of the last failure log record
}

// Option configures a Limiter. Options only record a setting; NewLimiter
// checks them all together, so their order never matters.
type Option func(*config)

// config collects the options before NewLimiter checks and applies them.
type config struct {
	mode         FailureMode
	modeSet      bool
	local        Store
	share        float64
	localSet     bool
	logger       *slog.Logger
	logEvery     time.Duration
	retryStore   time.Duration
	clock        Clock
	breaker      *Breaker
	breakerSet   bool
	settleWithin time.Duration
}

// Clock is where a Limiter reads the time and how it waits. The default is
// the system clock; tests inject their own to step time without sleeping
// (storetest.Clock is one).
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep pauses for d, or until ctx ends, when it returns ctx.Err().
	Sleep(ctx context.Context, d time.Duration) error
}

// WithFailureMode sets what Take answers while the store fails; default
// FailClosed. FailToLocal needs WithLocalFallback, which implies it.
func WithFailureMode(m FailureMode) Option {
	return func(c *config) { c.mode, c.modeSet = m, true }
}

// WithLocalFallback sets FailToLocal: while the store fails, decisions come
// from local, with every policy's Quota and Burst multiplied by share
// (0 < share ≤ 1, e.g. 1/replicas), rounded down but at least 1.
func WithLocalFallback(local Store, share float64) Option {
	return func(c *config) { c.local, c.share, c.localSet = local, share, true }
}

// WithLogger sets where store failures are logged (at most once per
// WithFailureLogInterval); default slog.Default().
func WithLogger(logger *slog.Logger) Option { return func(c *config) { c.logger = logger } }

// WithFailureLogInterval sets the least time between two failure log
// records (≥ 0; 0 logs every failure); default 10 s. Failures are always
// counted (StoreErrors).
func WithFailureLogInterval(d time.Duration) Option { return func(c *config) { c.logEvery = d } }

// WithStoreRetry sets how long the Limiter's own breaker stays open (the
// failure mode answers at once) before one call probes the store again
// (≥ 0; 0 probes on the next call); default DefaultBreakerCooldown
// (200 ms). This keeps a dead store from adding its timeout to every
// request, and recovery needs no action.
func WithStoreRetry(d time.Duration) Option { return func(c *config) { c.retryStore = d } }

// WithBreaker puts the Limiter behind b instead of a breaker of its own
// (DefaultBreakerThreshold consecutive failures open that one, and it logs
// each transition): share one among the Limiters of one store.
func WithBreaker(b *Breaker) Option { return func(c *config) { c.breaker, c.breakerSet = b, true } }

// WithClock sets the Limiter's clock, which times WithStoreRetry and Wait;
// default the system clock. The store keeps its own clock: give both the
// same one (memorystore.WithClock(c.Now)) for exact tests.
func WithClock(c Clock) Option { return func(cf *config) { cf.clock = c } }

// NewLimiter returns a Limiter applying policies through store.
//
// The options combine as follows; any other combination, a nil argument or
// a value out of range is an error wrapping ErrInvalidOption, whatever the
// order of the options:
//
//   - The failure mode is FailClosed unless WithFailureMode says otherwise.
//   - WithLocalFallback sets FailToLocal; with it, WithFailureMode may only
//     say FailToLocal too (FailOpen or FailClosed beside it contradict it),
//     and WithFailureMode(FailToLocal) needs WithLocalFallback.
//   - WithStoreRetry and WithFailureLogInterval apply in every mode, as the
//     store is skipped and its failures logged whatever answers instead.
//   - WithClock times WithStoreRetry and Wait.
//
// Errors: ErrInvalidPolicy (wrapped) when policies fail ValidatePolicies;
// ErrInvalidOption (wrapped) for a nil store, a nil option argument, an
// unknown failure mode, a share outside (0, 1], a negative duration or the
// contradictions above.
func NewLimiter(store Store, policies []Policy, opts ...Option) (*Limiter, error) {
	if nilcheck.Nil(store) {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidOption)
	}
	if err := ValidatePolicies(policies); err != nil {
		return nil, err
	}
	c := config{settleWithin: DefaultSettleWithin, retryStore: DefaultBreakerCooldown, logEvery: 10 * time.Second, logger: slog.Default(), clock: SystemClock}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		o(&c)
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	l := &Limiter{
		store:        store,
		policies:     append([]Policy(nil), policies...),
		mode:         c.mode,
		local:        c.local,
		retryStore:   c.retryStore,
		logEvery:     c.logEvery,
		logger:       c.logger,
		now:          c.clock.Now,
		settleWithin: c.settleWithin,
		sleep:        c.clock.Sleep,
		breaker:      c.breaker,
	}
	if l.breaker == nil {
		l.breaker = NewBreaker(BreakerConfig{Cooldown: max(c.retryStore, time.Nanosecond), Now: c.clock.Now, OnChange: BreakerLogger(c.logger, "")})
	}
	if c.localSet {
		l.mode = FailToLocal
		l.localPolicies = make([]Policy, len(policies))
		for i, p := range policies {
			l.localPolicies[i] = p.Scaled(c.share)
		}
	}
	return l, nil
}

// check reports the first option out of range or in conflict with another.
func (c *config) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)
	}
	switch {
	case int(c.mode) >= len(failureModeNames):
		return bad("unknown failure mode %v", c.mode)
	case c.localSet && nilcheck.Nil(c.local):
		return bad("WithLocalFallback: nil store")
	case c.localSet && !(c.share > 0 && c.share <= 1): // NaN too
		return bad("WithLocalFallback: share %v is outside (0, 1]", c.share)
	case c.localSet && c.modeSet && c.mode != FailToLocal:
		return bad("WithLocalFallback sets fail-to-local, but WithFailureMode says %v", c.mode)
	case !c.localSet && c.mode == FailToLocal:
		return bad("fail-to-local needs WithLocalFallback")
	case c.logger == nil:
		return bad("WithLogger: nil logger")
	case c.logEvery < 0:
		return bad("WithFailureLogInterval: %v is negative", c.logEvery)
	case c.retryStore < 0:
		return bad("WithStoreRetry: %v is negative", c.retryStore)
	case c.clock == nil:
		return bad("WithClock: nil clock")
	case c.breakerSet && c.breaker == nil:
		return bad("WithBreaker: nil breaker")
	case c.settleWithin <= 0:
		return bad("WithSettleWithin: %v is not positive", c.settleWithin)
	}
	return nil
}

// SystemClock is the default Clock: the time.Now, and timers.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 { // no timer to race an ended ctx
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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
	err := errSkipped
	ok, probe := l.breaker.allow()
	if ok {
		err = l.store.Take(ctx, key, cost, l.policies, d.Results)
	}
	var ended error // read once, so that the breaker and the answer agree
	if err != nil {
		ended = ctxend.Err(ctx)
	}
	if ok {
		l.breaker.done(ended != nil, probe, err)
	}
	if ended != nil {
		return d, ended
	}
	if err != nil {
		return l.fail(ctx, key, cost, d, err)
	}
	l.finish(&d, l.policies)
	return d, nil
}

// errSkipped stands for the last store failure while the breaker is open.
var errSkipped = fmt.Errorf("%w: skipped while the breaker is open", ErrStoreUnavailable)

func (l *Limiter) fail(ctx context.Context, key string, cost Cost, d Decision, cause error) (Decision, error) {
	if !errors.Is(cause, ErrStoreUnavailable) {
		cause = fmt.Errorf("%w: %w", ErrStoreUnavailable, cause)
	}
	l.storeErrors.Add(1)
	now := l.now().UnixNano()
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
