package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/header"
)

// Option configures a Transport (NewTransport) or a Client (New). An
// argument outside the range its docstring gives makes the constructor
// return an error naming the option and the value.
type Option func(*config) error

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

// maxWaitLimit bounds WithMaxWait, about 73 years: a wait plus its jitter
// (at most as long again) must still fit a time.Duration, or it would wrap
// around to no wait at all.
const maxWaitLimit = time.Duration(1 << 61)

// defaultBreaker is the breaker's configuration before WithBreaker.
var defaultBreaker = BreakerSettings{Failures: 5, OpenFor: 30 * time.Second, HalfOpenRequests: 1}

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

	breaker    BreakerSettings
	breakerSet bool // WithBreaker was given, which WithoutBreaker contradicts
	noBreaker  bool

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
		breaker:      defaultBreaker,
		requestIDs:   "X-Request-Id",
		now:          time.Now,
		sleep:        floodgate.SystemClock.Sleep,
		random:       rand.Float64,
		logger:       slog.Default(),
	}
}

// configure applies opts to the defaults in order, a later option of a
// kind replacing an earlier one, then refuses options that contradict each
// other, whatever their order. Errors wrap floodgate.ErrInvalidOption.
func configure(opts []Option) (config, error) {
	c := defaults()
	for _, o := range opts {
		if o == nil {
			return config{}, fmt.Errorf("%w: client: nil option", floodgate.ErrInvalidOption)
		}
		if err := o(&c); err != nil {
			return config{}, fmt.Errorf("%w: %w", floodgate.ErrInvalidOption, err)
		}
	}
	if err := c.contradiction(); err != nil {
		return config{}, fmt.Errorf("%w: %w", floodgate.ErrInvalidOption, err)
	}
	return c, nil
}

// contradiction reports two options that cannot both hold.
func (c *config) contradiction() error {
	switch {
	case c.breakerSet && c.noBreaker:
		return errors.New("client: WithBreaker and WithoutBreaker contradict each other")
	case c.attemptHeader != "" && strings.EqualFold(c.attemptHeader, c.requestIDs):
		// The attempt number would replace the caller's request ID on the
		// wire and in the audit records, losing the correlation both serve (C7).
		return fmt.Errorf("client: WithAttemptHeader(%q) would overwrite the request-ID header (WithRequestIDHeader)", c.attemptHeader)
	}
	return nil
}

// WithRate caps the requests per second the transport sends, summed over
// all origins and counting every attempt including retries (C3, C7).
// perSecond is in requests per second, above 0 and finite: the cap no
// server value can raise must exist. burst, at least 1, is how many
// requests may leave back to back after an idle period. Implemented with
// golang.org/x/time/rate.
func WithRate(perSecond float64, burst int) Option {
	return func(c *config) error {
		if !(perSecond > 0) || math.IsInf(perSecond, 1) {
			return fmt.Errorf("client: WithRate: requests per second must be above 0 and finite, got %v", perSecond)
		}
		if burst < 1 {
			return fmt.Errorf("client: WithRate: burst must be at least 1, got %d", burst)
		}
		c.rps, c.burst = perSecond, burst
		return nil
	}
}

// WithConcurrency caps the requests in flight at once over all origins; n
// is at least 1. A request holds its slot until its response body is read
// to the end or closed, so callers must close bodies.
func WithConcurrency(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("client: WithConcurrency: requests in flight must be at least 1, got %d", n)
		}
		c.concurrency = n
		return nil
	}
}

// WithBytesPerSecond caps the request-body bytes per second the transport
// sends, summed over all origins; burst is the largest chunk sent at once,
// in bytes. Both are at least 1.
func WithBytesPerSecond(perSecond, burst int64) Option {
	return func(c *config) error {
		if perSecond < 1 {
			return fmt.Errorf("client: WithBytesPerSecond: bytes per second must be at least 1, got %d", perSecond)
		}
		if burst < 1 {
			return fmt.Errorf("client: WithBytesPerSecond: burst must be at least 1 byte, got %d", burst)
		}
		c.bytesPerSec, c.bytesBurst = perSecond, burst
		return nil
	}
}

// WithMaxWait bounds every single sleep the transport makes. Server time
// values (Retry-After, t, legacy resets) are clamped to it; when a server
// asks for a longer wait the transport waits d and then sends one probe
// instead (draft-11 §7: probe rather than stall). A retry that would need
// a longer wait is not made. d is above 0 and at most 2⁶¹ ns (about 73
// years), so that a wait plus its jitter still fits a time.Duration.
func WithMaxWait(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 || d > maxWaitLimit {
			return fmt.Errorf("client: WithMaxWait: the wait must be above 0 and at most %v, got %v", maxWaitLimit, d)
		}
		c.maxWait = d
		return nil
	}
}

// WithMaxWindow sets the longest effective window t (and legacy reset) the
// client accepts; a longer one is an outlier, logged and ignored (draft-11
// §7 suggests ten minutes). t is whole seconds and is compared with d
// truncated to whole seconds, so d is at least one second: a shorter
// maximum would make every t an outlier.
func WithMaxWindow(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Second {
			return fmt.Errorf("client: WithMaxWindow: the window must be at least 1s, got %v", d)
		}
		c.maxWindow = d
		return nil
	}
}

// WithMaxRemaining sets the largest remaining value r accepted for request
// and concurrency units, at least 1; a larger r is an outlier, logged and
// ignored. Content-bytes values are only checked against their policy's q.
func WithMaxRemaining(n int64) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("client: WithMaxRemaining: the maximum must be at least 1, got %d", n)
		}
		c.maxRemaining = n
		return nil
	}
}

// WithMaxAttempts sets how many times one request may be sent, the first
// attempt included (C5): at least 1, and 1 disables retries.
func WithMaxAttempts(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("client: WithMaxAttempts: attempts must be at least 1, got %d", n)
		}
		c.maxAttempts = n
		return nil
	}
}

// WithBackoff sets the base delay before a retry when the server gave no
// Retry-After and no effective window, above 0; it doubles per attempt and
// is divided by the current pace factor. A delay beyond the maximum wait
// is not waited: that retry is not made (see WithMaxWait).
func WithBackoff(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("client: WithBackoff: the delay must be above 0, got %v", d)
		}
		c.backoff = d
		return nil
	}
}

// WithJitter sets the random extra wait added to every server-directed
// wait, as a fraction of that wait (at least of one second), in [0, 1]:
// 0.2 adds up to 20 %, 1 up to the wait again, 0 disables jitter. It
// spreads clients that received the same t or Retry-After (draft-11 §6).
func WithJitter(fraction float64) Option {
	return func(c *config) error {
		if !(fraction >= 0 && fraction <= 1) {
			return fmt.Errorf("client: WithJitter: fraction must be in [0, 1], got %v", fraction)
		}
		c.jitter = fraction
		return nil
	}
}

// WithAIMD tunes the pace factor, the share of the permitted pace in use:
// each 429 or temporary-reduced-capacity multiplies it by decrease, in
// (0, 1) — 1 would leave the pace unchanged by refusals; the factor never
// drops below DefaultMinFactor. After a probe it restarts at most at
// rampStart and each successful response adds rampStep, up to 1; both are
// in (0, 1].
func WithAIMD(decrease, rampStart, rampStep float64) Option {
	return func(c *config) error {
		switch {
		case !(decrease > 0 && decrease < 1):
			return fmt.Errorf("client: WithAIMD: decrease must be in (0, 1), got %v", decrease)
		case !(rampStart > 0 && rampStart <= 1):
			return fmt.Errorf("client: WithAIMD: rampStart must be in (0, 1], got %v", rampStart)
		case !(rampStep > 0 && rampStep <= 1):
			return fmt.Errorf("client: WithAIMD: rampStep must be in (0, 1], got %v", rampStep)
		}
		c.decrease, c.rampStart, c.rampStep = decrease, rampStart, rampStep
		return nil
	}
}

// BreakerSettings configures the per-origin circuit breaker (C4). A zero
// field keeps its default.
type BreakerSettings struct {
	// Failures is how many consecutive failures (5xx responses, timeouts
	// and other transport errors) open the breaker. Default 5.
	Failures uint32
	// OpenFor is how long an open breaker refuses requests before letting
	// HalfOpenRequests through; not negative. Default 30 s.
	OpenFor time.Duration
	// HalfOpenRequests is how many trial requests a half-open breaker
	// admits. Default 1.
	HalfOpenRequests uint32
}

// WithBreaker configures the per-origin circuit breaker; zero fields keep
// their defaults, a negative OpenFor is refused, and so is WithoutBreaker
// beside it. The breaker uses the wall clock (gobreaker has no clock
// hook), not the one of WithClock.
func WithBreaker(s BreakerSettings) Option {
	return func(c *config) error {
		if s.OpenFor < 0 {
			return fmt.Errorf("client: WithBreaker: OpenFor must not be negative, got %v", s.OpenFor)
		}
		b := defaultBreaker
		if s.Failures > 0 {
			b.Failures = s.Failures
		}
		if s.OpenFor > 0 {
			b.OpenFor = s.OpenFor
		}
		if s.HalfOpenRequests > 0 {
			b.HalfOpenRequests = s.HalfOpenRequests
		}
		c.breaker, c.breakerSet = b, true
		return nil
	}
}

// WithoutBreaker disables the circuit breaker; WithBreaker beside it is
// refused.
func WithoutBreaker() Option { return func(c *config) error { c.noBreaker = true; return nil } }

// WithAttemptHeader sets a request header carrying the attempt number
// (1, 2, …) on every attempt, so the server's logs can tell retries of one
// request apart (C7). name is a field name (an RFC 9110 token) other than
// the request-ID header (WithRequestIDHeader), which it would overwrite.
// Without this option nothing is sent.
func WithAttemptHeader(name string) Option {
	return func(c *config) error {
		if !header.IsToken(name) {
			return fmt.Errorf("client: WithAttemptHeader: %q is not a field name", name)
		}
		c.attemptHeader = name
		return nil
	}
}

// WithRequestIDHeader names the request header whose value the audit
// record copies as request_id: a field name (an RFC 9110 token), default
// "X-Request-Id"; empty disables.
func WithRequestIDHeader(name string) Option {
	return func(c *config) error {
		if name != "" && !header.IsToken(name) {
			return fmt.Errorf("client: WithRequestIDHeader: %q is not a field name", name)
		}
		c.requestIDs = name
		return nil
	}
}

// WithPartitionKey predicts the partition key (pk) of a planned request
// when the server documents how it derives keys (draft-11 §4, digest §1.3).
// Signals whose pk differs from the prediction are then not applied to
// the request. Without it every signal of the origin applies. A pk is
// neither an identity nor a permission (C6); it only selects state. f is
// not nil.
func WithPartitionKey(f func(*http.Request) (pk []byte, ok bool)) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("client: WithPartitionKey: nil function")
		}
		c.partitionKey = f
		return nil
	}
}

// WithLegacyReset says what the upstream's X-RateLimit-Reset means:
// header.ResetEpoch, header.ResetDelta, or header.ResetAuto, the default,
// which applies the digest §2.1 heuristic. Other values, header.ResetDate
// included (the parser reports it; it describes no upstream), are refused.
func WithLegacyReset(s header.ResetStyle) Option {
	return func(c *config) error {
		if s != header.ResetAuto && s != header.ResetEpoch && s != header.ResetDelta {
			return fmt.Errorf("client: WithLegacyReset: the style must be header.ResetAuto, ResetEpoch or ResetDelta, got %d", s)
		}
		c.legacyReset = s
		return nil
	}
}

// WithLenientParsing accepts the forms the test vectors mark as tolerable
// (Token names and units, sloppy HTTP-dates). Strict by default.
func WithLenientParsing() Option { return func(c *config) error { c.lenient = true; return nil } }

// WithClock sets the clock, not nil (default time.Now). Tests pair it with
// WithSleep to run in virtual time.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("client: WithClock: nil clock")
		}
		c.now = now
		return nil
	}
}

// WithSleep sets how the transport waits, not nil; sleep must return
// early with ctx's error when ctx is done. Default: a timer.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *config) error {
		if sleep == nil {
			return errors.New("client: WithSleep: nil sleep")
		}
		c.sleep = sleep
		return nil
	}
}

// WithRandom sets the source of jitter, not nil: a function returning
// values in [0, 1); default math/rand/v2.Float64.
func WithRandom(f func() float64) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("client: WithRandom: nil function")
		}
		c.random = f
		return nil
	}
}

// WithLogger receives the audit records (Debug, one per observation, C8:
// enable the Debug level to see them; nothing is logged per response at
// the default Info) and warnings about outliers, malformed fields and
// breaker changes. Not nil; default slog.Default();
// slog.New(slog.DiscardHandler) silences it.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("client: WithLogger: nil logger")
		}
		c.logger = l
		return nil
	}
}
