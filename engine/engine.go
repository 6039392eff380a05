package engine

import (
	"errors"
	"log/slog"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/nilcheck"
)

// Config configures an Engine.
type Config struct {
	// Store keeps the counters; it must also implement floodgate.Slots for
	// rules with Concurrency caps. Required.
	Store floodgate.Store
	// Local answers for rules with FailToLocal while Store fails,
	// typically a memorystore.Store (which also holds slots).
	Local floodgate.Store
	// Blocker, if set, refuses blocked keys before any limit runs.
	Blocker Blocker
	// Capacity, if set, lowers quotas while a temporary reduction holds.
	Capacity Capacity
	// Observer, if set, sees every decision. It runs in the request path:
	// keep it fast.
	Observer Observer
	// Logger gets the Limiters' store-failure records; default
	// slog.Default().
	Logger *slog.Logger
	// Clock is what throttling and the rules' Limiters read and wait on;
	// default floodgate.SystemClock.
	Clock floodgate.Clock
	// Breaker is what every compiled rule's Limiter asks before Store, so
	// that an outage is one breaker state; default a floodgate.NewBreaker
	// on Clock logging its transitions to Logger.
	Breaker *floodgate.Breaker
	// Tracer, if set, is told of every decision Compiled.Decide makes
	// (tracing: a span per decision). Nil costs one comparison.
	Tracer Tracer
}

// Blocker holds keys refused outright for a while, e.g. after abuse was
// detected.
type Blocker interface {
	// Blocked reports whether rule's key is blocked, and for how long more.
	Blocked(rule, key string) (retryAfter time.Duration, blocked bool)
}

// Capacity reports temporary quota reductions.
type Capacity interface {
	// Factor returns the share of policy's quota in force (0 < f ≤ 1; 1
	// when not reduced) and when the reduction ends.
	Factor(policy string) (factor float64, until time.Time)
}

// Observer receives one Event per decision, from every door.
type Observer interface{ Observe(Event) }

// Observers fans an Event out to several observers, in order; nil entries
// are skipped.
type Observers []Observer

// Observe implements Observer.
func (os Observers) Observe(e Event) {
	for _, o := range os {
		if o != nil {
			o.Observe(e)
		}
	}
}

// Event is one decision, as an Observer sees it.
type Event struct {
	Rule    string
	Policy  string // the denying policy or cap, or "" when allowed
	Key     string // the partition key; fingerprint it before showing it
	Verdict Verdict
	// Shadow: denied by a shadow rule, so served anyway (Verdict Allowed).
	Shadow bool
	// Degraded: the store failed and the rule's failure mode answered.
	Degraded bool
	// CallerEnded: Unavailable because the caller's context ended, not the
	// store (Outcome.CallerEnded).
	CallerEnded bool
	// Waits is how many times a throttle rule held the request.
	Waits      int
	RetryAfter time.Duration // when refused
	// Latency is the time spent in store round trips; CachedLatency the
	// time the store took to answer from its near cache, without one
	// (Result.Cached). Both are 0 when no Observer is set.
	Latency       time.Duration
	CachedLatency time.Duration
	// Reason says why a door let the request through unlimited (Verdict
	// Bypassed), e.g. "token" or "cidr".
	Reason string
}

// timing is where a decision's time went: store round trips, and answers
// the store gave from its near cache without one.
type timing struct{ store, cached time.Duration }

func (t *timing) add(o timing) { t.store += o.store; t.cached += o.cached }

// Engine compiles rules and decides requests against them. It is safe for
// concurrent use.
type Engine struct {
	store    floodgate.Store
	local    floodgate.Store
	blocker  Blocker
	capacity Capacity
	observer Observer
	logger   *slog.Logger
	clock    floodgate.Clock
	breaker  *floodgate.Breaker
	tracer   Tracer
}

// New returns an Engine, or an error when cfg has no Store (or a nil
// pointer as one, or as Local).
func New(cfg Config) (*Engine, error) {
	if nilcheck.Nil(cfg.Store) {
		return nil, errors.New("engine: no store")
	}
	if cfg.Local != nil && nilcheck.Nil(cfg.Local) {
		return nil, errors.New("engine: Local is a nil pointer")
	}
	e := &Engine{store: cfg.Store, local: cfg.Local, blocker: cfg.Blocker, capacity: cfg.Capacity,
		observer: cfg.Observer, logger: cfg.Logger, clock: cfg.Clock, breaker: cfg.Breaker, tracer: cfg.Tracer}
	if e.logger == nil {
		e.logger = slog.Default()
	}
	if e.clock == nil {
		e.clock = floodgate.SystemClock
	}
	if e.breaker == nil {
		e.breaker = floodgate.NewBreaker(floodgate.BreakerConfig{Now: e.clock.Now, OnChange: floodgate.BreakerLogger(e.logger, "")})
	}
	return e, nil
}

// Report hands an Event that a door decided on its own (a bypass, say) to
// the Observer, so that every outcome is seen in one place.
func (e *Engine) Report(ev Event) {
	if e.observer != nil {
		e.observer.Observe(ev)
	}
}
