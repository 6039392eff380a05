package httplimit

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clientip"
	"github.com/floodgate/floodgate/header"
)

// Mode is what a rule does with a denied request.
type Mode uint8

const (
	// Enforce rejects a denied request with 429.
	Enforce Mode = iota
	// Shadow evaluates, logs and counts, but never blocks and sends no
	// rate-limit headers: for trying a rule on real traffic first.
	Shadow
	// Throttle holds a denied request until its policies admit it, up to the
	// rule's MaxDelay, and rejects with 429 only when that is not enough
	// (REQUIREMENTS T1). The wait ends early if the client goes away.
	Throttle
)

var modeNames = [...]string{Enforce: "enforce", Shadow: "shadow", Throttle: "throttle"}

// String returns "enforce", "shadow" or "throttle".
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode is the inverse of Mode.String; "" means Enforce.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return Enforce, nil
	}
	for m, name := range modeNames {
		if name == s {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("httplimit: unknown mode %q (want enforce, shadow or throttle)", s)
}

// Rule limits the requests that match its pattern.
type Rule struct {
	// Name labels the rule in logs and metrics; default: the pattern.
	Name string
	// Pattern selects requests, in http.ServeMux syntax
	// "[METHOD ][HOST]/[PATH]" (see the package doc); "/" matches all.
	// Rules are tried in order and the first match wins.
	Pattern string
	// Policies all apply at once (REQUIREMENTS K3): a request passes only if
	// every one admits it. Requests policies are charged Cost,
	// ContentBytes policies the request body size, and ConcurrentRequests
	// policies hold an in-flight slot while the handler runs.
	Policies []floodgate.Policy
	// Key builds the partition key from its parts (K1); default ClientIP().
	Key []KeyPart
	// Cost charges a request against the Requests policies; default 1.
	// An error answers 400.
	Cost func(r *http.Request) (int64, error)
	// Mode is Enforce (default), Shadow or Throttle.
	Mode Mode
	// MaxDelay bounds how long Throttle holds a request.
	MaxDelay time.Duration
	// FailureMode is what happens while the store fails (S3); default
	// FailClosed, answered with 503.
	FailureMode floodgate.FailureMode
	// LocalShare is the share of each quota, and of each
	// concurrent-requests policy's slots, enforced locally with FailToLocal
	// (e.g. 1/replicas); in (0, 1], 0 meaning 1.
	LocalShare float64
	// MaxBodyBytes caps a body of unknown length read under ContentBytes
	// policies; reading past it fails the read. Default 10 MiB.
	MaxBodyBytes int64
	// Plan picks further policies per request: for tiered quotas, the plan
	// of the request's API key (K6). It runs after the rule's Policies, so
	// those can guard it by client IP (K7): guessing keys is limited before
	// any key lookup. It returns the plan and its partition key ("" means:
	// build it from Key). A
	// *Reject error is written as it is (e.g. a 401); any other error is a
	// failing source, answered by FailureMode: 503 when closed, the request
	// passes unlimited when open.
	Plan func(r *http.Request) (key string, plan Plan, err error)
}

// Event is one decision, as an Observer sees it.
type Event struct {
	Rule       string
	Policy     string // the policy that denied, or "" when allowed
	Key        string // the partition key; fingerprint it before showing it
	Allowed    bool
	Shadow     bool          // denied by a shadow rule, so served anyway
	Reduced    bool          // denied only because of a capacity reduction
	RetryAfter time.Duration // when denied
	Latency    time.Duration // time spent in the store
}

// Observer receives decisions.
type Observer interface{ Observe(Event) }

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

// Plan is a named policy set chosen per request, such as a pricing tier.
// Limiters are built once per plan name and rebuilt when its policies
// change.
type Plan struct {
	Name     string
	Policies []floodgate.Policy
}

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

// HeaderStyle selects the rate-limit fields on responses.
type HeaderStyle uint8

const (
	// Both sends draft-11 RateLimit/RateLimit-Policy and X-RateLimit-*.
	Both HeaderStyle = iota
	// Draft11 sends RateLimit and RateLimit-Policy only.
	Draft11
	// Legacy sends X-RateLimit-Limit/Remaining/Reset only.
	Legacy
	// None sends no rate-limit fields (Retry-After still goes on a 429).
	None
)

var styleNames = [...]string{Both: "both", Draft11: "draft11", Legacy: "legacy", None: "none"}

// String returns "both", "draft11", "legacy" or "none".
func (s HeaderStyle) String() string {
	if int(s) < len(styleNames) {
		return styleNames[s]
	}
	return fmt.Sprintf("style(%d)", uint8(s))
}

// ParseHeaderStyle is the inverse of HeaderStyle.String; "" means Both.
func ParseHeaderStyle(s string) (HeaderStyle, error) {
	if s == "" {
		return Both, nil
	}
	for st, name := range styleNames {
		if name == s {
			return HeaderStyle(st), nil
		}
	}
	return 0, fmt.Errorf("httplimit: unknown header style %q (want both, draft11, legacy or none)", s)
}

// Config configures a Middleware.
type Config struct {
	// Store keeps the counters; it must also implement floodgate.Slots when
	// a rule has ConcurrentRequests policies. Required.
	Store floodgate.Store
	// Local answers for rules with FailToLocal while Store fails, typically
	// a memorystore.Store.
	Local floodgate.Store
	// Rules are tried in order; a request no rule matches passes untouched.
	Rules []Rule
	// Skip lists patterns never limited, e.g. "GET /healthz" (K5).
	Skip []string
	// Bypass lets tokens and networks through (K5).
	Bypass Bypass
	// ClientIP resolves client addresses; default: the socket peer only,
	// no proxy trusted.
	ClientIP *clientip.Resolver
	// Headers selects the response fields; default Both.
	Headers HeaderStyle
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
	OnReject func(w http.ResponseWriter, r *http.Request, d floodgate.Decision)
	// Metrics receives counters and latencies; nil records nothing. See
	// NewMetrics.
	Metrics *Metrics
	// Observer, if set, sees every decision (e.g. abuse detection, top
	// offenders, a dashboard). It runs in the request path: keep it fast.
	Observer Observer
	// Blocker, if set, refuses blocked keys before any limit runs, with 429
	// and the abnormal-usage-detected problem type (draft-11 §5).
	Blocker Blocker
	// Capacity, if set, lowers quotas while a temporary reduction holds;
	// requests refused only because of it get 503 with the
	// temporary-reduced-capacity problem type (draft-11 §5).
	Capacity Capacity
	// Logger gets one record per rejected request (O1); default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock for X-RateLimit-Reset epochs; default time.Now.
	Now func() time.Time
}

// Middleware is net/http rate-limiting middleware. Build it with New.
type Middleware struct {
	rules    []*rule
	skip     []*pattern
	bypass   Bypass
	tokens   [][]byte
	resolver *clientip.Resolver
	headers  Headers
	onReject func(http.ResponseWriter, *http.Request, floodgate.Decision)
	metrics  *Metrics
	observer Observer
	blocker  Blocker
	capacity Capacity
	logger   *slog.Logger

	lastNoPeer atomic.Int64 // when an unknown client address was last logged, Unix ns
}

// New validates cfg and builds the Middleware. Errors name the rule and
// what is wrong: a bad pattern, an invalid policy (wrapping
// floodgate.ErrInvalidPolicy), one policy name given two different
// definitions, ConcurrentRequests policies over a store without slots, or
// a rule that a skip or an earlier rule hides from every request.
func New(cfg Config) (*Middleware, error) {
	if cfg.Store == nil {
		return nil, errors.New("httplimit: no store")
	}
	m := &Middleware{
		bypass:   cfg.Bypass,
		resolver: cfg.ClientIP,
		headers:  Headers{Style: cfg.Headers, Reset: cfg.ResetStyle, WarnAt: cfg.WarnAt, Now: cfg.Now},
		onReject: cfg.OnReject,
		metrics:  cfg.Metrics,
		observer: cfg.Observer,
		blocker:  cfg.Blocker,
		capacity: cfg.Capacity,
		logger:   cfg.Logger,
	}
	if m.resolver == nil {
		m.resolver, _ = clientip.New(clientip.Config{})
	}
	if m.headers.WarnAt == 0 {
		m.headers.WarnAt = 0.9
	}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	switch {
	case cfg.Headers > None:
		return nil, fmt.Errorf("httplimit: unknown header style %d", cfg.Headers)
	case cfg.ResetStyle > header.ResetDelta:
		return nil, fmt.Errorf("httplimit: X-RateLimit-Reset is written as header.ResetEpoch or header.ResetDelta, not %v", cfg.ResetStyle)
	case cfg.WarnAt > 1 || math.IsNaN(cfg.WarnAt):
		return nil, fmt.Errorf("httplimit: WarnAt %v is a share of the quota, at most 1 (negative: never)", cfg.WarnAt)
	case cfg.Bypass.Header != "" && !header.IsToken(cfg.Bypass.Header):
		return nil, fmt.Errorf("httplimit: bypass header %q is not a field name", cfg.Bypass.Header)
	}
	if m.bypass.Header == "" {
		m.bypass.Header = "X-Bypass-Token"
	}
	// Client addresses are compared unmapped, so a network written in
	// IPv4-mapped form must be too, or it would never match.
	m.bypass.CIDRs = make([]netip.Prefix, len(cfg.Bypass.CIDRs))
	for i, p := range cfg.Bypass.CIDRs {
		u, err := clientip.NormalPrefix(p)
		if err != nil {
			return nil, fmt.Errorf("httplimit: bypass network %v: %w", p, err)
		}
		m.bypass.CIDRs[i] = u
	}
	for _, t := range cfg.Bypass.Tokens {
		if t == "" {
			return nil, errors.New("httplimit: empty bypass token")
		}
		m.tokens = append(m.tokens, []byte(t))
	}
	for _, s := range cfg.Skip {
		p, err := parsePattern(s)
		if err != nil {
			return nil, fmt.Errorf("httplimit: skip: %w", err)
		}
		m.skip = append(m.skip, p)
	}
	names := map[string]bool{}
	for i := range cfg.Rules {
		r, err := newRule(cfg.Rules[i], cfg.Store, cfg.Local, m.logger)
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
	if err := sameDefinitions(cfg.Rules); err != nil {
		return nil, err
	}
	if err := m.reachable(); err != nil {
		return nil, err
	}
	return m, nil
}

// reachable refuses a rule that no request can reach: skips are checked
// before every rule, then the rules in order, the first match winning. A
// rule behind a broader one is a mistake in the order, and would silently
// never limit anything. The check is Covers, which may miss a pair but
// never refuses a reachable rule.
func (m *Middleware) reachable() error {
	for i, r := range m.rules {
		for _, s := range m.skip {
			if s.covers(r.pattern) {
				return fmt.Errorf("httplimit: rule %q is never reached: skip %q matches every request it does, and skips are checked first", r.name, s.raw)
			}
		}
		for _, e := range m.rules[:i] {
			if e.pattern.covers(r.pattern) {
				return fmt.Errorf("httplimit: rule %q is never reached: rule %q, before it, matches every request it does; put the narrower rule first", r.name, e.name)
			}
		}
	}
	return nil
}

// sameDefinitions checks that rules giving a policy the same name define it
// alike. A store keeps a key's state per policy name, so two rules sharing
// a key and a policy name share its quota, which is how two routes are given
// one budget; with different definitions, one rule would read the other's
// state under its own algorithm and quota.
func sameDefinitions(rules []Rule) error {
	type def struct {
		p    floodgate.Policy
		rule string
	}
	seen := map[string]def{}
	for _, r := range rules {
		name := r.Name
		if name == "" {
			name = r.Pattern
		}
		for _, p := range r.Policies {
			d, ok := seen[p.Name]
			if !ok {
				seen[p.Name] = def{p, name}
				continue
			}
			if !alike(d.p, p) {
				return fmt.Errorf("httplimit: %w: policy %q is defined differently by rules %q (%s) and %q (%s); policies with one name share their state, so give each its own name",
					floodgate.ErrInvalidPolicy, p.Name, d.rule, describe(d.p), name, describe(p))
			}
		}
	}
	return nil
}

// alike reports whether two policies decide the same way: a bucket's Burst
// 0 and Burst = Quota are one capacity, and an in-flight cap has no window.
func alike(a, b floodgate.Policy) bool {
	if a.Unit != b.Unit || a.Quota != b.Quota {
		return false
	}
	return a.Unit == floodgate.ConcurrentRequests ||
		a.Algorithm == b.Algorithm && a.Window == b.Window && a.Capacity() == b.Capacity()
}

// describe names a policy's settings for an error message.
func describe(p floodgate.Policy) string {
	if p.Unit == floodgate.ConcurrentRequests {
		return fmt.Sprintf("%d in flight", p.Quota)
	}
	s := fmt.Sprintf("%s %d per %s", p.Algorithm, p.Quota, p.Window)
	if p.Burst > 0 {
		s += fmt.Sprintf(" burst %d", p.Burst)
	}
	if p.Unit != floodgate.Requests {
		s += " " + p.Unit.String()
	}
	return s
}

// Wrap returns next behind the rate limits.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	for _, p := range m.skip {
		if p.match(r) {
			next.ServeHTTP(w, r)
			return
		}
	}
	var ru *rule
	for _, c := range m.rules {
		if c.pattern.match(r) {
			ru = c
			break
		}
	}
	if ru == nil {
		next.ServeHTTP(w, r)
		return
	}
	info := Info{Rule: ru.name, Route: ru.pattern.raw}
	if a, k, err := m.resolver.ClientKey(r); err == nil {
		info.ClientIP = k
		if m.allowListed(a) {
			m.metrics.bypass(ru.name, "cidr")
			next.ServeHTTP(w, r)
			return
		}
	} else if now, last := time.Now().UnixNano(), m.lastNoPeer.Load(); now-last >= int64(time.Minute) && m.lastNoPeer.CompareAndSwap(last, now) {
		m.logger.Warn("client address unknown: requests keyed by client IP share one partition (behind a proxy on a Unix socket, set clientip.Config.TrustSocketPeers)",
			slog.String("remote_addr", r.RemoteAddr), slog.String("rule", ru.name))
	}
	if len(m.tokens) > 0 && m.tokenOK(r.Header.Get(m.bypass.Header)) {
		m.metrics.bypass(ru.name, "token")
		next.ServeHTTP(w, r)
		return
	}
	var release func()
	defer func() {
		if release != nil {
			release() // also on panic, so a slot is never leaked
		}
	}()
	if ru.static != nil {
		rel, ok := m.apply(w, r, ru, ru.static, buildKey(ru.key, r, info))
		release = rel
		if !ok {
			return
		}
	}
	if ru.plan != nil {
		key, plan, err := ru.plan(r)
		if err != nil {
			m.planFailed(w, r, ru, next, err)
			return
		}
		lim, err := ru.limitsFor(plan)
		if err != nil {
			m.logger.Error("bad plan", slog.String("rule", ru.name), slog.Any("error", err))
			m.unavailable(w, r, ru, err)
			return
		}
		if key == "" {
			key = buildKey(ru.key, r, info)
		}
		rel, ok := m.apply(w, r, ru, lim, key)
		release = chain(release, rel)
		if !ok {
			return
		}
	}
	next.ServeHTTP(w, r)
}

// planFailed answers a request whose Plan func failed: a *Reject as it
// says, otherwise a failing source, by the rule's failure mode.
func (m *Middleware) planFailed(w http.ResponseWriter, r *http.Request, ru *rule, next http.Handler, err error) {
	var rej *Reject
	rejected := errors.As(err, &rej)
	switch {
	case !rejected && r.Context().Err() != nil:
		contextEnded(w, r.Context()) // not the plan source's failure
	case rejected && (rej.Status < 400 || rej.Status > 599):
		m.logger.Error("plan rejected a request with a status that is not an error", slog.String("rule", ru.name), slog.Int("status", rej.Status))
		header.Problem{Title: "Internal Server Error", Status: 500,
			Detail: fmt.Sprintf("rule %q refused the request with status %d, not a 4xx or 5xx", ru.name, rej.Status)}.Write(w)
	case rejected:
		p := rej.Problem
		p.Status = rej.Status // RFC 9457 §3.1.2: the member repeats the response's status
		p.Write(w)
	case ru.failure == floodgate.FailOpen || ru.failure == floodgate.FailToLocal:
		m.metrics.storeError(ru.name)
		next.ServeHTTP(w, r)
	default:
		m.metrics.storeError(ru.name)
		m.unavailable(w, r, ru, err)
	}
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
	ok := 0
	for _, t := range m.tokens {
		ok |= subtle.ConstantTimeCompare([]byte(got), t)
	}
	return ok == 1
}

// apply runs the rule's limits for key. It returns whether the request may
// go on, having written the response when not, and a release func for a
// concurrency slot to run after the handler.
func (m *Middleware) apply(w http.ResponseWriter, r *http.Request, ru *rule, lim *limits, key string) (release func(), ok bool) {
	ctx := r.Context()
	if m.blocker != nil {
		if ra, blocked := m.blocker.Blocked(ru.name, key); blocked {
			m.block(w, r, ru, key, ra)
			return nil, false
		}
	}
	full := lim
	if m.capacity != nil {
		lim = m.reduce(ru, lim)
	}
	var latency time.Duration
	var results []floodgate.Result
	var denied *floodgate.Decision
	var deniedBy *floodgate.Limiter // which of lim's limiters denied, and at what cost
	var deniedCost int64

	for i, sp := range lim.slots {
		rel, free, got, err := lim.slotStore.Acquire(ctx, key, sp, lim.lease)
		if err != nil && ctx.Err() == nil {
			m.metrics.storeError(ru.name)
			if lim.localSlots != nil {
				rel, free, got, err = lim.localSlots.Acquire(ctx, key, lim.localSlotCaps[i], lim.lease)
			}
		}
		switch {
		case err != nil && ctx.Err() != nil:
			contextEnded(w, ctx)
			return release, false
		case err != nil && ru.failure == floodgate.FailOpen:
			continue
		case err != nil:
			m.unavailable(w, r, ru, err)
			return release, false
		}
		res := floodgate.Result{Policy: sp, Allowed: got, Remaining: free}
		if !got {
			// A slot frees when some request ends; a second is a fair guess.
			res.RetryAfter = time.Second
			res.ResetAfter = time.Second
			d := floodgate.Decision{Policy: sp, RetryAfter: time.Second, ResetAfter: time.Second, Results: []floodgate.Result{res}}
			denied = &d
		} else {
			release = chain(release, rel)
		}
		results = append(results, res)
	}

	if denied == nil && lim.requests != nil {
		cost := int64(1)
		if ru.cost != nil {
			c, err := ru.cost(r)
			if err != nil {
				header.Problem{Title: "Bad Request", Status: 400, Detail: "cost: " + err.Error()}.Write(w)
				return release, false
			}
			cost = c
		}
		d, lat, handled := m.take(w, r, ru, lim.requests, key, cost)
		latency += lat
		if handled {
			return release, false
		}
		if results == nil {
			results = d.Results // the common case: no copy
		} else {
			results = append(results, d.Results...)
		}
		if !d.Allowed {
			denied, deniedBy, deniedCost = &d, lim.requests, cost
		}
	}

	if denied == nil && lim.bytes != nil {
		if n := r.ContentLength; n >= 0 {
			d, lat, handled := m.take(w, r, ru, lim.bytes, key, n)
			latency += lat
			if handled {
				return release, false
			}
			results = append(results, d.Results...)
			if !d.Allowed {
				denied, deniedBy, deniedCost = &d, lim.bytes, n
			}
		} else {
			r.Body = &meteredBody{ReadCloser: r.Body, ctx: ctx, l: lim.bytes, key: key, left: ru.maxBody}
		}
	}

	if denied != nil {
		reduced := lim != full && deniedBy != nil && fitsFull(ctx, full, deniedBy == lim.requests, key, deniedCost)
		m.metrics.decision(ru.name, denied.Policy.Name, "denied")
		if m.observer != nil {
			m.observer.Observe(Event{Rule: ru.name, Policy: denied.Policy.Name, Key: key, Shadow: ru.mode == Shadow,
				Reduced: reduced, RetryAfter: denied.RetryAfter, Latency: latency})
		}
		if ru.mode == Shadow {
			m.metrics.shadowDenied(ru.name, denied.Policy.Name)
			m.logDenied(ctx, ru, key, denied, RetryAfterSeconds(denied), slog.LevelInfo, "shadow rate limit exceeded")
			return release, true
		}
		m.headers.Set(w.Header(), lim.policyValue, results, denied)
		if reduced {
			m.reducedCapacity(w, r, ru, key, denied)
		} else {
			m.reject(w, r, ru, key, denied)
		}
		return release, false
	}
	if m.observer != nil {
		m.observer.Observe(Event{Rule: ru.name, Key: key, Allowed: true, Latency: latency})
	}
	m.metrics.decision(ru.name, "", "allowed")
	if ru.mode != Shadow {
		m.headers.Set(w.Header(), lim.policyValue, results, nil)
	}
	return release, true
}

// take asks l, throttling when the rule says so. handled reports that a
// response (400/413/503) was already written.
func (m *Middleware) take(w http.ResponseWriter, r *http.Request, ru *rule, l *floodgate.Limiter, key string, cost int64) (d floodgate.Decision, latency time.Duration, handled bool) {
	ctx := r.Context()
	timed := m.metrics != nil || m.observer != nil || ru.mode == Throttle
	var deadline time.Time
	for {
		var start time.Time
		if timed {
			start = time.Now()
		}
		d, err := l.Take(ctx, key, cost)
		if timed {
			took := time.Since(start)
			latency += took
			m.metrics.storeLatency(ru.name, took)
		}
		switch {
		case errors.Is(err, floodgate.ErrCostExceedsQuota):
			header.Problem{Title: "Content Too Large", Status: 413, Detail: err.Error()}.Write(w)
			return d, latency, true
		case errors.Is(err, floodgate.ErrInvalidCost):
			header.Problem{Title: "Bad Request", Status: 400, Detail: err.Error()}.Write(w)
			return d, latency, true
		case err != nil && ctx.Err() != nil:
			contextEnded(w, ctx)
			return d, latency, true
		case err != nil:
			m.metrics.storeError(ru.name)
			m.unavailable(w, r, ru, err)
			return d, latency, true
		}
		if d.Degraded {
			m.metrics.storeError(ru.name)
		}
		if d.Allowed || ru.mode != Throttle {
			return d, latency, false
		}
		if deadline.IsZero() {
			deadline = start.Add(ru.maxDelay)
		}
		if time.Now().Add(d.RetryAfter).After(deadline) {
			return d, latency, false
		}
		m.metrics.throttled(ru.name)
		t := time.NewTimer(d.RetryAfter)
		select {
		case <-ctx.Done():
			// The request cannot wait until it fits: refused, as one
			// whose wait exceeds MaxDelay is.
			t.Stop()
			return d, latency, false
		case <-t.C:
		}
	}
}

// reduce returns lim with every quota scaled by its policy's capacity
// factor, or lim itself when no reduction holds.
func (m *Middleware) reduce(ru *rule, lim *limits) *limits {
	var scaled []floodgate.Policy
	for i, p := range lim.policies {
		f, _ := m.capacity.Factor(p.Name)
		if f >= 1 || f <= 0 {
			continue
		}
		if scaled == nil {
			scaled = slices.Clone(lim.policies)
		}
		scaled[i].Quota = max(1, int64(float64(p.Quota)*f))
		if p.Burst > 0 {
			scaled[i].Burst = max(1, int64(float64(p.Burst)*f))
		}
	}
	if scaled == nil {
		return lim
	}
	reduced, err := ru.limitsFor(Plan{Name: "\x00reduced\x00" + lim.policyValue[0], Policies: scaled})
	if err != nil {
		m.logger.Error("capacity reduction", slog.String("rule", ru.name), slog.Any("error", err))
		return lim
	}
	return reduced
}

// fitsFull reports whether the request, denied under reduced quotas,
// would fit the full ones: then the reduction, not the client, is why it
// was refused. It peeks (cost 0) at the full policies, so it spends
// nothing, and it runs only on that rare denied path.
func fitsFull(ctx context.Context, full *limits, requests bool, key string, cost int64) bool {
	l := full.bytes
	if requests {
		l = full.requests
	}
	if l == nil {
		return false
	}
	d, err := l.Take(ctx, key, 0)
	if err != nil {
		return false
	}
	for _, r := range d.Results {
		if r.Remaining < cost {
			return false
		}
	}
	return true
}

func chain(a, b func()) func() {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func() { b(); a() }
}

// meteredBody charges ContentBytes policies as a body of unknown length is
// read, failing the read once the quota or the size cap is exceeded.
type meteredBody struct {
	io.ReadCloser
	ctx  context.Context
	l    *floodgate.Limiter
	key  string
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
		d, terr := b.l.Take(b.ctx, b.key, int64(n))
		if terr != nil || !d.Allowed {
			b.left = 0
			return 0, ErrBodyLimited
		}
	}
	return n, err
}
