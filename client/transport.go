package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/header"
	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"
)

var (
	// ErrWaitTooLong is returned, without sending, when a request would
	// have to queue longer than the maximum wait behind the transport's own
	// requests (see WithMaxWait).
	ErrWaitTooLong = errors.New("client: wait would exceed the maximum wait")
	// ErrCircuitOpen is wrapped by the error returned while an origin's
	// circuit breaker refuses requests (C4). The request was not sent.
	ErrCircuitOpen = errors.New("client: circuit breaker open")
)

// Transport is an http.RoundTripper that paces requests by the rate-limit
// signals of each origin's responses, within local caps no server value
// can raise, retries idempotent requests and keeps a circuit breaker per
// origin. Build it with NewTransport; it is safe for concurrent use.
type Transport struct {
	base  http.RoundTripper
	cfg   config
	rate  *rate.Limiter // requests per second, all origins (C3)
	bytes *rate.Limiter // request-body bytes per second, all origins
	sem   chan struct{} // requests in flight, all origins

	mu      sync.Mutex
	origins map[string]*origin

	stats struct {
		attempts, retries, refusals, probes, outliers, ignored, breakerOpen, tooLong atomic.Int64
	}
}

// NewTransport returns a Transport sending through base
// (http.DefaultTransport when nil). Options apply in order, a later one of
// a kind replacing an earlier one; none depends on another's order.
//
// Errors: floodgate.ErrInvalidOption (wrapped) for a nil option, an option
// outside the range its docstring gives, WithBreaker beside WithoutBreaker,
// or an attempt header that is the request-ID header. The message names
// the option and the value.
func NewTransport(base http.RoundTripper, opts ...Option) (*Transport, error) {
	c, err := configure(opts)
	if err != nil {
		return nil, err
	}
	return newTransport(base, c), nil
}

// newTransport builds a Transport from a configuration configure checked,
// or the defaults.
func newTransport(base http.RoundTripper, c config) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{
		base:    base,
		cfg:     c,
		rate:    rate.NewLimiter(rate.Limit(c.rps), c.burst),
		bytes:   rate.NewLimiter(rate.Limit(c.bytesPerSec), int(c.bytesBurst)),
		sem:     make(chan struct{}, c.concurrency),
		origins: map[string]*origin{},
	}
}

// New returns an *http.Client whose Transport is NewTransport(nil,
// opts...), with NewTransport's errors.
func New(opts ...Option) (*http.Client, error) {
	tr, err := NewTransport(nil, opts...)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: tr}, nil
}

// Stats counts what the transport did since it was built.
type Stats struct {
	Attempts    int64 // requests sent, retries included (C7)
	Retries     int64 // attempts after the first
	Refusals    int64 // 429 responses and rate-limit problem types
	Probes      int64 // requests sent alone after a signal expired or a refusal (C4)
	Outliers    int64 // items ignored as outliers (C3)
	Ignored     int64 // malformed fields ignored
	BreakerOpen int64 // requests refused by an open circuit breaker
	WaitTooLong int64 // requests refused with ErrWaitTooLong
}

// Stats returns the counters.
func (tr *Transport) Stats() Stats {
	s := &tr.stats
	return Stats{s.attempts.Load(), s.retries.Load(), s.refusals.Load(), s.probes.Load(),
		s.outliers.Load(), s.ignored.Load(), s.breakerOpen.Load(), s.tooLong.Load()}
}

// State returns a snapshot of what the transport knows about origin
// ("https://api.example.com"; default ports are dropped), and false if it
// has not talked to it.
func (tr *Transport) State(originURL string) (OriginState, bool) {
	tr.mu.Lock()
	o := tr.origins[originURL]
	tr.mu.Unlock()
	if o == nil {
		return OriginState{}, false
	}
	return o.snapshot(tr), true
}

// originOf is scheme://host[:port], lowercased, default ports dropped (C6).
func originOf(r *http.Request) string {
	scheme := strings.ToLower(r.URL.Scheme)
	host := strings.ToLower(r.URL.Host)
	if host == "" {
		host = strings.ToLower(r.Host)
	}
	if scheme == "http" {
		host = strings.TrimSuffix(host, ":80")
	} else if scheme == "https" {
		host = strings.TrimSuffix(host, ":443")
	}
	return scheme + "://" + host
}

func (tr *Transport) origin(name string) *origin {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	o := tr.origins[name]
	if o == nil {
		o = newOrigin(name)
		if !tr.cfg.noBreaker {
			b := tr.cfg.breaker
			o.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
				Name:        name,
				MaxRequests: b.HalfOpenRequests,
				Timeout:     b.OpenFor,
				ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= b.Failures },
				IsExcluded:  func(err error) bool { return errors.Is(err, context.Canceled) },
				OnStateChange: func(name string, from, to gobreaker.State) {
					tr.cfg.logger.Warn("circuit breaker state change", "origin", name, "from", from.String(), "to", to.String())
				},
			})
		}
		tr.origins[name] = o
	}
	return o
}

// idempotent: RFC 9110 §9.2.2 methods, or any request carrying an
// Idempotency-Key (C5).
func idempotent(r *http.Request) bool {
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	}
	return r.Header.Get("Idempotency-Key") != ""
}

type noRetryKey struct{}

// RoundTrip implements http.RoundTripper. It sends req at most
// MaxAttempts times: retries happen only for idempotent requests whose
// body can be replayed through GetBody, after 429, 502, 503, 504 or a
// transport error, and only when the wait the server asks for fits the
// maximum wait (C5). Every attempt passes the origin's pace and the local
// caps (C7). The request body is closed, sent or not. The returned
// response is the last attempt's; errors are the
// last attempt's error, ErrWaitTooLong, an error wrapping ErrCircuitOpen,
// or the context's error.
func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	o := tr.origin(originOf(req))
	hasBody := req.Body != nil && req.Body != http.NoBody
	retryable := idempotent(req) && (!hasBody || req.GetBody != nil) && ctx.Value(noRetryKey{}) == nil
	for attempt := 1; ; attempt++ {
		areq := req
		if attempt > 1 {
			areq = req.Clone(ctx)
			if hasBody {
				b, err := req.GetBody()
				if err != nil {
					return nil, fmt.Errorf("client: replaying body: %w", err)
				}
				areq.Body = b
			}
			tr.stats.retries.Add(1)
		}
		resp, sig, sent, err := tr.attempt(ctx, o, areq, req, attempt)
		if !sent && areq.Body != nil {
			// A RoundTripper closes the body even when it sends nothing
			// (http.RoundTripper); the base transport does when it sends.
			areq.Body.Close()
		}
		last := !retryable || attempt >= tr.cfg.maxAttempts || ctx.Err() != nil
		if err != nil {
			if !sent || last {
				return nil, err
			}
			d := tr.backoff(attempt)
			if d > tr.cfg.maxWait {
				return nil, err
			}
			if serr := tr.cfg.sleep(ctx, min(d+tr.jitter(d), tr.cfg.maxWait)); serr != nil {
				return nil, err
			}
			continue
		}
		if last || !retryStatus(sig) {
			return resp, nil
		}
		// The origin gate already waits for Retry-After or t after a
		// refusal or a 503 with Retry-After; other 5xx back off here.
		var wait time.Duration
		if sig.Status == 429 || sig.HasRetryAfter {
			if retryDelay(tr, sig, 1, attempt) > tr.cfg.maxWait {
				return resp, nil // the server asks for more patience than we allow
			}
		} else if wait = tr.backoff(attempt); wait > tr.cfg.maxWait {
			return resp, nil
		}
		drain(resp)
		if wait > 0 {
			if err := tr.cfg.sleep(ctx, min(wait+tr.jitter(wait), tr.cfg.maxWait)); err != nil {
				return nil, err
			}
		}
	}
}

func retryStatus(s *Signal) bool {
	if s.ProblemType() == header.ProblemAbnormalUsageDetected {
		return false // a classification to slow down for, not to retry into
	}
	switch s.Status {
	case 429, 502, 503, 504:
		return true
	}
	return false
}

func (tr *Transport) backoff(attempt int) time.Duration {
	d := tr.cfg.backoff
	for i := 1; i < attempt && d < tr.cfg.maxWait; i++ {
		d *= 2
	}
	return d
}

// jitter returns a random extra wait in [0, fraction × max(d, 1s)).
func (tr *Transport) jitter(d time.Duration) time.Duration {
	if tr.cfg.jitter == 0 {
		return 0
	}
	return time.Duration(tr.cfg.random() * tr.cfg.jitter * float64(max(d, time.Second)))
}

// drainWait bounds reading a discarded body: one that stalls longer is
// closed with its connection, so a refusal whose body stalls costs a call
// at most ReadProblem's second and this.
const drainWait = 100 * time.Millisecond

// drain reads a little of a discarded body so the connection can be
// reused, then closes it.
func drain(resp *http.Response) {
	stall := time.AfterFunc(drainWait, func() { resp.Body.Close() })
	io.CopyN(io.Discard, resp.Body, 64<<10)
	stall.Stop()
	resp.Body.Close()
}

// attempt sends one attempt through the gate, the local caps and the
// breaker. sent reports whether the request left the client.
func (tr *Transport) attempt(ctx context.Context, o *origin, req, orig *http.Request, n int) (resp *http.Response, sig *Signal, sent bool, err error) {
	var pk []byte
	if tr.cfg.partitionKey != nil {
		if k, ok := tr.cfg.partitionKey(orig); ok {
			pk = k
		}
	}
	t, err := tr.gate(ctx, o, req.ContentLength, pk)
	if err != nil {
		return nil, nil, false, err
	}
	abort := func(err error) (*http.Response, *Signal, bool, error) {
		o.cancel(t)
		return nil, nil, false, err
	}

	// The concurrency slot first, then the rate token (C3): a token taken
	// while waiting for a slot would be spent late, and the requests
	// queued behind a slow server would leave together when it answers.
	select {
	case tr.sem <- struct{}{}:
	case <-ctx.Done():
		return abort(ctx.Err())
	}
	release := func() { <-tr.sem }

	// Local request rate (C3): every attempt counts (C7).
	now := tr.cfg.now()
	rv := tr.rate.ReserveN(now, 1)
	if d := rv.DelayFrom(now); d > tr.cfg.maxWait {
		rv.CancelAt(now)
		release()
		tr.stats.tooLong.Add(1)
		return abort(ErrWaitTooLong)
	} else if err := tr.cfg.sleep(ctx, d); err != nil {
		rv.CancelAt(tr.cfg.now())
		release()
		return abort(err)
	}

	var done func(error)
	if o.breaker != nil {
		if done, err = o.breaker.Allow(); err != nil {
			release()
			tr.stats.breakerOpen.Add(1)
			return abort(fmt.Errorf("%w: %s: %w", ErrCircuitOpen, o.name, err))
		}
	}

	if tr.cfg.attemptHeader != "" || (req.Body != nil && req.Body != http.NoBody) {
		if req == orig {
			req = req.Clone(ctx)
		}
		if tr.cfg.attemptHeader != "" {
			req.Header.Set(tr.cfg.attemptHeader, strconv.Itoa(n))
		}
		if req.Body != nil && req.Body != http.NoBody {
			req.Body = &meteredBody{ReadCloser: req.Body, tr: tr, ctx: ctx}
		}
	}
	if t.probe {
		tr.stats.probes.Add(1)
	}
	tr.stats.attempts.Add(1)
	resp, err = tr.base.RoundTrip(req)
	if err != nil {
		if done != nil {
			done(err)
		}
		release()
		o.mu.Lock()
		if t.probe {
			o.endProbe(false)
		}
		o.mu.Unlock()
		return nil, nil, true, err
	}
	if done != nil {
		if resp.StatusCode >= 500 {
			done(fmt.Errorf("status %d", resp.StatusCode))
		} else {
			done(nil)
		}
	}

	at := tr.cfg.now()
	s := Extract(resp.Header, resp.StatusCode, at, ExtractOptions{
		MaxWindow: tr.cfg.maxWindow, MaxRemaining: tr.cfg.maxRemaining,
		LegacyReset: tr.cfg.legacyReset, Lenient: tr.cfg.lenient,
	})
	if resp.StatusCode >= 400 {
		s.Problem = ReadProblem(resp)
	}
	if s.Status == 429 || strings.HasPrefix(s.ProblemType(), ianaProblemTypes) {
		tr.stats.refusals.Add(1)
	}
	o.observe(tr, t, at, &s, n)
	tr.audit(ctx, o.name, at, req, n, t, &s)

	if resp.StatusCode == http.StatusSwitchingProtocols || resp.Body == nil {
		release()
	} else {
		resp.Body = &releaseBody{ReadCloser: resp.Body, release: release}
	}
	return resp, &s, true, nil
}

// gate waits at the origin until the request may be sent and returns its
// reservation. Every single sleep is at most maxWait.
func (tr *Transport) gate(ctx context.Context, o *origin, size int64, pk []byte) (*ticket, error) {
	for {
		g := o.reserve(tr, tr.cfg.now(), size, pk)
		switch {
		case g.tooLong:
			tr.stats.tooLong.Add(1)
			return nil, ErrWaitTooLong
		case g.waitOn != nil:
			select {
			case <-g.waitOn:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case g.t == nil:
			if err := tr.cfg.sleep(ctx, min(g.wait, tr.cfg.maxWait)); err != nil {
				return nil, err
			}
		default:
			if g.wait > 0 {
				if err := tr.cfg.sleep(ctx, g.wait); err != nil {
					o.cancel(g.t)
					return nil, err
				}
				if o.stale(g.t) {
					o.cancel(g.t)
					continue
				}
			}
			return g.t, nil
		}
	}
}

// meteredBody holds request-body bytes to the local bytes-per-second cap.
type meteredBody struct {
	io.ReadCloser
	tr  *Transport
	ctx context.Context
}

func (b *meteredBody) Read(p []byte) (int, error) {
	if burst := int(b.tr.cfg.bytesBurst); len(p) > burst {
		p = p[:burst]
	}
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		now := b.tr.cfg.now()
		d := b.tr.bytes.ReserveN(now, n).DelayFrom(now)
		for d > 0 {
			step := min(d, b.tr.cfg.maxWait)
			if serr := b.tr.cfg.sleep(b.ctx, step); serr != nil {
				return 0, serr
			}
			d -= step
		}
	}
	return n, err
}

// releaseBody frees the concurrency slot when the body is read to the end
// or closed, whichever comes first.
type releaseBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releaseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.release)
	}
	return n, err
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
