package client

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/floodgate/floodgate/header"
)

// Option configures a Transport (NewTransport) or a Client (New).
type Option func(*config)

// Defaults. They are deliberately modest: a caller who needs more raises
// them knowingly, and no server value can raise them (C3).
const (
	DefaultRequestsPerSecond = 10.0             // WithRate
	DefaultBurst             = 5                // WithRate
	DefaultConcurrency       = 8                // WithConcurrency
	DefaultBytesPerSecond    = 1 << 20          // WithBytesPerSecond: 1 MiB/s of request bodies
	DefaultBytesBurst        = 64 << 10         // WithBytesPerSecond: 64 KiB
	DefaultMaxWait           = 30 * time.Second // WithMaxWait: with 3 attempts, a call waits at most about a minute
	DefaultMaxWindow         = 10 * time.Minute // WithMaxWindow, the draft's example threshold (§7)
	DefaultMaxRemaining      = 1_000_000        // WithMaxRemaining
	DefaultMaxAttempts       = 3                // WithMaxAttempts
	DefaultBackoff           = time.Second      // WithBackoff
	DefaultJitter            = 0.2              // WithJitter
	DefaultDecrease          = 0.5              // WithAIMD
	DefaultRampStart         = 0.5              // WithAIMD
	DefaultRampStep          = 0.25             // WithAIMD
	DefaultMinFactor         = 1.0 / 64         // WithAIMD
)

type config struct {
	rps          float64
	burst        int
	concurrency  int
	bytesPerSec  int64
	bytesBurst   int64
	maxWait      time.Duration
	maxWindow    time.Duration
	maxRemaining int64
	maxAttempts  int
	backoff      time.Duration
	jitter       float64
	decrease     float64
	rampStart    float64
	rampStep     float64
	minFactor    float64

	breaker   BreakerSettings
	noBreaker bool

	attemptHeader string
	requestIDs    string
	partitionKey  func(*http.Request) ([]byte, bool)
	legacyReset   header.ResetStyle
	lenient       bool

	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) error
	random func() float64
	logger *slog.Logger
}

func defaults() config {
	return config{
		rps:          DefaultRequestsPerSecond,
		burst:        DefaultBurst,
		concurrency:  DefaultConcurrency,
		bytesPerSec:  DefaultBytesPerSecond,
		bytesBurst:   DefaultBytesBurst,
		maxWait:      DefaultMaxWait,
		maxWindow:    DefaultMaxWindow,
		maxRemaining: DefaultMaxRemaining,
		maxAttempts:  DefaultMaxAttempts,
		backoff:      DefaultBackoff,
		jitter:       DefaultJitter,
		decrease:     DefaultDecrease,
		rampStart:    DefaultRampStart,
		rampStep:     DefaultRampStep,
		minFactor:    DefaultMinFactor,
		breaker:      BreakerSettings{Failures: 5, OpenFor: 30 * time.Second, HalfOpenRequests: 1},
		requestIDs:   "X-Request-Id",
		now:          time.Now,
		sleep:        sleepCtx,
		random:       rand.Float64,
	}
}

// sleepCtx waits for d or until ctx is done, whichever comes first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// WithRate caps the requests per second the transport sends, summed over
// all origins and counting every attempt including retries (C3, C7).
// burst is how many may leave back to back after an idle period. A value
// ≤ 0 keeps the default. Implemented with golang.org/x/time/rate.
func WithRate(perSecond float64, burst int) Option {
	return func(c *config) {
		if perSecond > 0 {
			c.rps = perSecond
		}
		if burst > 0 {
			c.burst = burst
		}
	}
}

// WithConcurrency caps the requests in flight at once over all origins. A
// request holds its slot until its response body is read to the end or
// closed, so callers must close bodies. n ≤ 0 keeps the default.
func WithConcurrency(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.concurrency = n
		}
	}
}

// WithBytesPerSecond caps the request-body bytes per second the transport
// sends, summed over all origins; burst is the largest chunk sent at once.
// Values ≤ 0 keep the defaults.
func WithBytesPerSecond(perSecond, burst int64) Option {
	return func(c *config) {
		if perSecond > 0 {
			c.bytesPerSec = perSecond
		}
		if burst > 0 {
			c.bytesBurst = burst
		}
	}
}

// WithMaxWait bounds every single sleep the transport makes. Server time
// values (Retry-After, t, legacy resets) are clamped to it; when a server
// asks for a longer wait the transport waits d and then sends one probe
// instead (draft-11 §7: probe rather than stall). A retry that would need
// a longer wait is not made. d ≤ 0 keeps the default.
func WithMaxWait(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.maxWait = d
		}
	}
}

// WithMaxWindow sets the longest effective window t (and legacy reset) the
// client accepts; a longer one is an outlier, logged and ignored (draft-11
// §7 suggests ten minutes). d ≤ 0 keeps the default.
func WithMaxWindow(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.maxWindow = d
		}
	}
}

// WithMaxRemaining sets the largest remaining value r accepted for request
// and concurrency units; a larger r is an outlier, logged and ignored.
// Content-bytes values are only checked against their policy's q.
// n ≤ 0 keeps the default.
func WithMaxRemaining(n int64) Option {
	return func(c *config) {
		if n > 0 {
			c.maxRemaining = n
		}
	}
}

// WithMaxAttempts sets how many times one request may be sent, the first
// attempt included (C5). 1 disables retries; n ≤ 0 keeps the default.
func WithMaxAttempts(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxAttempts = n
		}
	}
}

// WithBackoff sets the base delay before a retry when the server gave no
// Retry-After and no effective window; it doubles per attempt and is
// divided by the current pace factor. d ≤ 0 keeps the default.
func WithBackoff(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.backoff = d
		}
	}
}

// WithJitter sets the random extra wait added to every server-directed
// wait, as a fraction of that wait (at least of one second): 0.2 adds up
// to 20 %. It spreads clients that received the same t or Retry-After
// (draft-11 §6). Negative keeps the default; 0 disables jitter.
func WithJitter(fraction float64) Option {
	return func(c *config) {
		if fraction >= 0 {
			c.jitter = fraction
		}
	}
}

// WithAIMD tunes the pace factor, the share of the permitted pace in use:
// each 429 or temporary-reduced-capacity multiplies it by decrease; after
// a probe it restarts at most at rampStart and each successful response
// adds rampStep, up to 1. Values outside (0, 1] keep the defaults.
func WithAIMD(decrease, rampStart, rampStep float64) Option {
	return func(c *config) {
		if decrease > 0 && decrease <= 1 {
			c.decrease = decrease
		}
		if rampStart > 0 && rampStart <= 1 {
			c.rampStart = rampStart
		}
		if rampStep > 0 && rampStep <= 1 {
			c.rampStep = rampStep
		}
	}
}

// BreakerSettings configures the per-origin circuit breaker (C4).
type BreakerSettings struct {
	// Failures is how many consecutive failures (5xx responses, timeouts
	// and other transport errors) open the breaker. Default 5.
	Failures uint32
	// OpenFor is how long an open breaker refuses requests before letting
	// HalfOpenRequests through. Default 30 s.
	OpenFor time.Duration
	// HalfOpenRequests is how many trial requests a half-open breaker
	// admits. Default 1.
	HalfOpenRequests uint32
}

// WithBreaker configures the per-origin circuit breaker; zero fields keep
// their defaults. The breaker uses the wall clock (gobreaker has no clock
// hook), not the one of WithClock.
func WithBreaker(s BreakerSettings) Option {
	return func(c *config) {
		if s.Failures > 0 {
			c.breaker.Failures = s.Failures
		}
		if s.OpenFor > 0 {
			c.breaker.OpenFor = s.OpenFor
		}
		if s.HalfOpenRequests > 0 {
			c.breaker.HalfOpenRequests = s.HalfOpenRequests
		}
	}
}

// WithoutBreaker disables the circuit breaker.
func WithoutBreaker() Option { return func(c *config) { c.noBreaker = true } }

// WithAttemptHeader sets a request header carrying the attempt number
// (1, 2, …) on every attempt, so the server's logs can tell retries of one
// request apart (C7). Empty (the default) sends nothing.
func WithAttemptHeader(name string) Option { return func(c *config) { c.attemptHeader = name } }

// WithRequestIDHeader names the request header whose value the audit
// record copies as request_id (default "X-Request-Id"; empty disables).
func WithRequestIDHeader(name string) Option { return func(c *config) { c.requestIDs = name } }

// WithPartitionKey predicts the partition key (pk) of a planned request
// when the server documents how it derives keys (draft-11 §4, digest §1.3).
// Signals whose pk differs from the prediction are then not applied to
// the request. Without it every signal of the origin applies. A pk is
// neither an identity nor a permission (C6); it only selects state.
func WithPartitionKey(f func(*http.Request) (pk []byte, ok bool)) Option {
	return func(c *config) { c.partitionKey = f }
}

// WithLegacyReset says what the upstream's X-RateLimit-Reset means
// (header.ResetEpoch or header.ResetDelta); the default applies the digest
// §2.1 heuristic.
func WithLegacyReset(s header.ResetStyle) Option { return func(c *config) { c.legacyReset = s } }

// WithLenientParsing accepts the forms the test vectors mark as tolerable
// (Token names and units, sloppy HTTP-dates). Strict by default.
func WithLenientParsing() Option { return func(c *config) { c.lenient = true } }

// WithClock sets the clock (default time.Now). Tests pair it with
// WithSleep to run in virtual time.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

// WithSleep sets how the transport waits; sleep must return early with
// ctx's error when ctx is done. Default: a timer.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *config) {
		if sleep != nil {
			c.sleep = sleep
		}
	}
}

// WithRandom sets the source of jitter, a function returning values in
// [0, 1); default math/rand/v2.Float64.
func WithRandom(f func() float64) Option {
	return func(c *config) {
		if f != nil {
			c.random = f
		}
	}
}

// WithLogger receives the audit records (Debug, one per observation, C8:
// enable the Debug level to see them; nothing is logged per response at
// the default Info) and warnings about outliers, malformed fields and
// breaker changes. Default slog.Default(); slog.New(slog.DiscardHandler)
// silences it.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }
