package httplimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clientip"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/internal/nilcheck"
	"github.com/floodgate/floodgate/pattern"
	"github.com/floodgate/floodgate/refusallog"
	"github.com/floodgate/floodgate/secret"
)

// Reject is an error a Plan func returns to refuse a request with its own
// status and problem, e.g. 401 api_key_required. Status must be 4xx or
// 5xx; any other is logged and answered with a 500.
type Reject struct {
	Status  int
	Problem header.Problem
}

func (e *Reject) Error() string {
	return fmt.Sprintf("httplimit: rejected with %d: %s", e.Status, e.Problem.Title)
}

// Unwrap marks a Reject as the request's refusal, not a failing source.
func (e *Reject) Unwrap() error { return engine.ErrRejected }

// SourceError is an error a Plan func returns when the source it reads
// has failed, naming that source: the 503 of a fail-closed rule then says
// "<Source> unavailable" rather than blaming the rate-limit store. Err is
// logged and counted, never sent to the client.
type SourceError struct {
	Source string // e.g. "API key database"
	Err    error
}

func (e *SourceError) Error() string { return e.Source + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *SourceError) Unwrap() error { return e.Err }

// Bypass lets trusted traffic through without limits (K5).
type Bypass struct {
	// Header carries a bypass token; default "X-Bypass-Token".
	Header string
	// Tokens are compared in constant time.
	Tokens []string
	// CIDRs are client networks never limited, e.g. webhook senders. The
	// client address is the one the trusted-proxy rules give.
	CIDRs []netip.Prefix
}

// Config configures a Middleware.
type Config struct {
	// Engine decides the requests: its engine.Config holds the store and
	// what decides beside it (Local, Observer, Blocker, Capacity, Clock,
	// Breaker, Tracer). Or give Store alone and New builds one with
	// engine.Config{Store: Store, Logger: Logger}. One of them is
	// required. A Blocker's refusals are 429s with the
	// abnormal-usage-detected problem type, a Capacity's 503s with
	// temporary-reduced-capacity (draft-11 §5).
	Engine *engine.Engine
	// Store keeps the counters of the Engine New builds; it must also
	// implement floodgate.Slots when a rule has Concurrency caps.
	Store floodgate.Store

	// Rules are tried in order; a request no rule matches passes untouched,
	// so a Config without rules limits nothing (the daemon's, when it
	// serves only Envoy's or the decision API's callers).
	Rules []Rule
	// Skip lists patterns never limited, e.g. "GET /healthz" (K5).
	Skip []string
	// Bypass lets tokens and networks through (K5).
	Bypass Bypass
	// ClientIP resolves client addresses; default: the socket peer only,
	// no proxy trusted.
	ClientIP *clientip.Resolver
	// Headers selects the response fields; default engine.Both.
	Headers engine.HeaderStyle
	// ResetStyle is X-RateLimit-Reset's form: header.ResetEpoch (default,
	// Unix seconds) or header.ResetDelta (seconds from now).
	ResetStyle header.ResetStyle
	// WarnAt sends X-RateLimit-Warning once this share of any policy is
	// used (H6); default 0.9, negative disables.
	WarnAt float64
	// OnReject, if set, writes the 429 response of a limit's refusal in
	// place of the default problem+json body. The rate-limit fields and
	// Retry-After are already set on w when it runs. Blocker's refusals
	// keep their own problem type.
	OnReject func(w http.ResponseWriter, r *http.Request, o *engine.Outcome)
	// Logger gets the records of refusals (O1): one per rule and key per
	// RefusalLogInterval, counting those held back; default
	// slog.Default().
	Logger *slog.Logger
	// RefusalLogInterval is the least time between two records of one
	// key's refusals by one rule; default DefaultRefusalLogInterval (10s),
	// negative for a record per refusal.
	RefusalLogInterval time.Duration
	// Now is the clock for X-RateLimit-Reset epochs and for the time a
	// refund (Rule.CostHeader) names its charge by; default time.Now.
	// Give the store the same clock.
	Now func() time.Time
}

// Middleware is net/http rate-limiting middleware. Build it with New.
type Middleware struct {
	engine   *engine.Engine
	rules    []*rule
	skip     []*pattern.Pattern
	bypass   Bypass
	tokens   [][]byte
	resolver *clientip.Resolver
	fields   engine.Fields
	onReject func(http.ResponseWriter, *http.Request, *engine.Outcome)
	logger   *slog.Logger
	refusals *refusallog.Log

	lastNoPeer atomic.Int64 // when an unknown client address was last logged, Unix ns
}

// New validates cfg and builds the Middleware. Errors name the rule and
// what is wrong: a bad pattern, an invalid policy or cap (wrapping
// floodgate.ErrInvalidPolicy), one policy name given two different
// definitions, caps over a store without slots, or a rule that a skip or
// an earlier rule hides from every request.
func New(cfg Config) (*Middleware, error) {
	m := &Middleware{
		engine:   cfg.Engine,
		bypass:   cfg.Bypass,
		resolver: cfg.ClientIP,
		fields:   engine.Fields{Style: cfg.Headers, Reset: cfg.ResetStyle, WarnAt: cfg.WarnAt, Now: cfg.Now},
		onReject: cfg.OnReject,
		logger:   cfg.Logger,
		refusals: refusallog.New(cfg.RefusalLogInterval, cfg.Now),
	}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	if err := m.setEngine(cfg); err != nil {
		return nil, err
	}
	if m.resolver == nil {
		m.resolver, _ = clientip.New(clientip.Config{})
	}
	if m.fields.WarnAt == 0 {
		m.fields.WarnAt = 0.9
	}
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	if err := m.setBypass(cfg.Bypass); err != nil {
		return nil, err
	}
	for _, s := range cfg.Skip {
		p, err := pattern.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("httplimit: skip: %w", err)
		}
		m.skip = append(m.skip, p)
	}
	names := map[string]bool{}
	for i := range cfg.Rules {
		r, err := newRule(cfg.Rules[i], m.engine)
		if err != nil {
			return nil, err
		}
		if names[r.name] {
			return nil, fmt.Errorf("httplimit: two rules are named %q; names label metrics, logs and events, so each needs its own", r.name)
		}
		names[r.name] = true
		m.rules = append(m.rules, r)
	}
	// After each rule's own checks, whose errors say more.
	if err := sameDefinitions(m.rules); err != nil {
		return nil, err
	}
	if err := m.reachable(); err != nil {
		return nil, err
	}
	return m, nil
}

// setEngine takes cfg.Engine, or builds one on cfg.Store.
func (m *Middleware) setEngine(cfg Config) error {
	if m.engine != nil {
		if cfg.Store != nil {
			return errors.New("httplimit: give either Engine or Store, not both")
		}
		return nil
	}
	if nilcheck.Nil(cfg.Store) {
		return errors.New("httplimit: no store (give Engine or Store)")
	}
	var err error
	m.engine, err = engine.New(engine.Config{Store: cfg.Store, Logger: m.logger})
	return err
}

func checkConfig(cfg Config) error {
	switch {
	case cfg.Headers > engine.None:
		return fmt.Errorf("httplimit: unknown header style %d", cfg.Headers)
	case cfg.ResetStyle > header.ResetDelta:
		return fmt.Errorf("httplimit: X-RateLimit-Reset is written as header.ResetEpoch or header.ResetDelta, not %v", cfg.ResetStyle)
	case cfg.WarnAt > 1 || math.IsNaN(cfg.WarnAt):
		return fmt.Errorf("httplimit: WarnAt %v is a share of the quota, at most 1 (negative: never)", cfg.WarnAt)
	case cfg.Bypass.Header != "" && !header.IsToken(cfg.Bypass.Header):
		return fmt.Errorf("httplimit: bypass header %q is not a field name", cfg.Bypass.Header)
	}
	return nil
}

func (m *Middleware) setBypass(b Bypass) error {
	if m.bypass.Header == "" {
		m.bypass.Header = "X-Bypass-Token"
	}
	// Client addresses are compared unmapped, so a network written in
	// IPv4-mapped form must be too, or it would never match.
	m.bypass.CIDRs = make([]netip.Prefix, len(b.CIDRs))
	for i, p := range b.CIDRs {
		u, err := clientip.NormalPrefix(p)
		if err != nil {
			return fmt.Errorf("httplimit: bypass network %v: %w", p, err)
		}
		m.bypass.CIDRs[i] = u
	}
	for _, t := range b.Tokens {
		if t == "" {
			return errors.New("httplimit: empty bypass token")
		}
		m.tokens = append(m.tokens, []byte(t))
	}
	return nil
}

// reachable refuses a rule that no request can reach: skips are checked
// before every rule, then the rules in order, the first match winning. A
// rule behind a broader one is a mistake in the order, and would silently
// never limit anything. The check is Covers, which may miss a pair but
// never refuses a reachable rule.
func (m *Middleware) reachable() error {
	pats := make([]*pattern.Pattern, len(m.rules))
	for i, r := range m.rules {
		pats[i] = r.pattern
	}
	shadows := pattern.Shadows(m.skip, pats)
	if len(shadows) == 0 {
		return nil
	}
	sh := shadows[0] // the first in rule order, as a reader fixes them
	by := fmt.Sprintf("rule %q, before it,", m.rules[sh.By].name)
	if sh.Skip {
		by = fmt.Sprintf("skip %q", m.skip[sh.By])
	}
	return fmt.Errorf("httplimit: rule %q is never reached: %s matches every request it does; %s", m.rules[sh.Rule].name, by, sh.Advice())
}

// sameDefinitions checks that rules giving a policy the same name define
// it alike. Two rules sharing a key and a policy share its quota, which is
// how two routes are given one budget; with different quotas or windows
// one rule would read the other's state under its own, and with different
// algorithms (whose states the stores keep apart) the budget a reader of
// the configuration sees would silently be two.
func sameDefinitions(rules []*rule) error {
	type def struct {
		p    floodgate.Policy
		rule string
	}
	seen := map[string]def{}
	for _, r := range rules {
		for _, p := range r.limits.Policies() {
			d, ok := seen[p.Name]
			if !ok {
				seen[p.Name] = def{p, r.name}
				continue
			}
			if d.p.Algorithm != p.Algorithm || d.p.Unit != p.Unit || d.p.Quota != p.Quota || d.p.Window != p.Window || d.p.Capacity() != p.Capacity() || !d.p.Calendar.Same(p.Calendar) {
				return fmt.Errorf("httplimit: %w: policy %q is defined differently by rules %q (%s) and %q (%s); policies with one name share their state, so give each its own name",
					floodgate.ErrInvalidPolicy, p.Name, d.rule, describe(d.p), r.name, describe(p))
			}
		}
	}
	return nil
}

// describe names a policy's settings for an error message.
func describe(p floodgate.Policy) string {
	s := fmt.Sprintf("%s %d per %s", p.Algorithm, p.Quota, p.Window)
	if p.Burst > 0 {
		s += fmt.Sprintf(" burst %d", p.Burst)
	}
	if p.Unit != floodgate.Requests {
		s += " " + p.Unit.String()
	}
	return s
}

// Wrap returns next behind the rate limits. It panics when next is nil.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	if next == nil { // as http.Handle does: at setup, not on the first request
		panic("httplimit: Wrap(nil)")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	ru, info, pass := m.match(r)
	if pass {
		next.ServeHTTP(w, r)
		return
	}
	req, err := ru.request(r, info)
	if err != nil {
		m.rejected(w, r, ru, err)
		return
	}
	out := ru.limits.Decide(r.Context(), req)
	defer out.Release() // also on panic, so a slot is never leaked
	if out.Verdict != engine.Allowed {
		m.refuse(w, r, ru, req.Key, &out)
		return
	}
	m.fields.Set(w.Header(), &out)
	if ru.bytes && r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody {
		// A copy: the outcome itself stays on the stack in the common case.
		r.Body = &meteredBody{ReadCloser: r.Body, ctx: r.Context(), out: out, left: ru.maxBody}
	}
	if ru.costHeader != "" {
		m.serveCounted(w, r, next, ru, &out, req.Cost.Requests)
		return
	}
	next.ServeHTTP(w, r)
}

// match finds the rule for r, or reports that r passes unlimited: skipped,
// matched by no rule, or bypassed by network or token.
func (m *Middleware) match(r *http.Request) (ru *rule, info Info, pass bool) {
	if ru = m.find(r); ru == nil {
		return nil, info, true
	}
	info = Info{Rule: ru.name, Route: ru.pattern.String()}
	if a, k, err := m.resolver.ClientKey(r); err == nil {
		info.ClientIP = k
		if m.allowListed(a) {
			m.engine.Report(engine.Event{Rule: ru.name, Verdict: engine.Bypassed, Reason: "cidr"})
			return nil, info, true
		}
	} else if now, last := time.Now().UnixNano(), m.lastNoPeer.Load(); now-last >= int64(time.Minute) && m.lastNoPeer.CompareAndSwap(last, now) {
		m.logger.Warn("client address unknown: requests keyed by client IP share one partition (behind a proxy on a Unix socket, set clientip.Config.TrustSocketPeers)",
			slog.String("remote_addr", r.RemoteAddr), slog.String("rule", ru.name))
	}
	if len(m.tokens) > 0 && m.tokenOK(r.Header.Get(m.bypass.Header)) {
		m.engine.Report(engine.Event{Rule: ru.name, Verdict: engine.Bypassed, Reason: "token"})
		return nil, info, true
	}
	return ru, info, false
}

// find returns the rule r matches (skip patterns first, then the rules
// in order), or nil when a skip pattern or no rule matches.
func (m *Middleware) find(r *http.Request) *rule {
	for _, p := range m.skip {
		if p.Match(r.Method, r.Host, r.URL.Path) {
			return nil
		}
	}
	for _, c := range m.rules {
		if c.pattern.Match(r.Method, r.Host, r.URL.Path) {
			return c
		}
	}
	return nil
}

func (m *Middleware) allowListed(a netip.Addr) bool {
	for _, p := range m.bypass.CIDRs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// tokenOK compares against every token, without stopping early, so the
// time taken says nothing about which token came close.
func (m *Middleware) tokenOK(got string) bool {
	if got == "" {
		return false
	}
	ok := false
	for _, t := range m.tokens {
		ok = secret.Equal(got, string(t)) || ok // Equal first: every token is compared
	}
	return ok
}

// meteredBody charges ContentBytes policies as a body of unknown length is
// read, failing the read once the quota or the size cap is exceeded.
type meteredBody struct {
	io.ReadCloser
	ctx  context.Context
	out  engine.Outcome
	left int64
}

// ErrBodyLimited is the read error of a request body stopped by a
// content-bytes policy or by Rule.MaxBodyBytes.
var ErrBodyLimited = errors.New("httplimit: request body exceeds its content-bytes limit")

func (b *meteredBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, ErrBodyLimited
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.left -= int64(n)
		if !b.out.Charge(b.ctx, floodgate.Cost{ContentBytes: int64(n)}) {
			b.left = 0
			return 0, ErrBodyLimited
		}
	}
	return n, err
}
