package server

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clientip"
	"github.com/floodgate/floodgate/config"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
)

// state is everything a configuration decides, swapped as one by Apply.
type state struct {
	cfg      *config.Config
	resolver *clientip.Resolver
	mw       *httplimit.Middleware
	gateway  http.Handler // nil when the gateway is off
	auth     http.Handler // the middleware around an "allowed" answer

	headers httplimit.Headers // the decision API's fields, as the middleware writes them

	rules    map[string]*limiterSet // decision API, by rule name
	policies map[string]floodgate.Policy
	all      *limiterSet // every rate policy, for peek and reset

	mu   sync.Mutex
	sets map[string]*limiterSet // policy lists asked for by the API
}

// limiterSet is a Limiter with its RateLimit-Policy field ready.
type limiterSet struct {
	l           *floodgate.Limiter
	names       []string
	policyField []string // RateLimit-Policy; shared, len == cap
}

func (s *Server) build(cfg *config.Config) (*state, error) {
	st := &state{cfg: cfg, rules: map[string]*limiterSet{}, sets: map[string]*limiterSet{}, policies: map[string]floodgate.Policy{}}
	ccfg := clientip.Config{TrustedProxies: cfg.TrustedProxies}
	for _, h := range cfg.ClientIP.Headers {
		src, err := config.ParseSource(h)
		if err != nil {
			return nil, err
		}
		ccfg.Sources = append(ccfg.Sources, src)
	}
	if cfg.ClientIP.IPv6Prefix > 0 {
		ccfg.GroupIPv6, ccfg.IPv6PrefixBits = true, cfg.ClientIP.IPv6Prefix
	}
	var err error
	if st.resolver, err = clientip.New(ccfg); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	st.headers.Style, _ = httplimit.ParseHeaderStyle(cfg.Headers.Style)
	st.headers.Reset = header.ResetEpoch
	if cfg.Headers.Reset == "delta" {
		st.headers.Reset = header.ResetDelta
	}
	st.headers.WarnAt = cfg.Headers.WarnAt

	hc := httplimit.Config{
		Store:      s.store,
		Local:      s.local,
		Skip:       append([]string(nil), cfg.Skip...),
		ClientIP:   st.resolver,
		Headers:    st.headers.Style,
		ResetStyle: st.headers.Reset,
		WarnAt:     st.headers.WarnAt,
		Metrics:    s.hl,
		Logger:     s.logger,
		Bypass:     httplimit.Bypass{Header: cfg.Bypass.Header, Tokens: cfg.Bypass.Tokens},
	}
	for _, c := range cfg.Bypass.CIDRs {
		p, err := clientip.ParsePrefix(c)
		if err != nil {
			return nil, err
		}
		hc.Bypass.CIDRs = append(hc.Bypass.CIDRs, p)
	}
	keys, err := s.tierSource(cfg)
	if err != nil {
		return nil, err
	}
	for i, r := range cfg.Rules {
		if r.Skip {
			hc.Skip = append(hc.Skip, r.Match)
			continue
		}
		rule, err := s.rule(cfg, st, i)
		if err != nil {
			return nil, err
		}
		if r.Tiers != nil {
			rule.Plan = tierPlan(cfg, i, keys)
		}
		// The middleware serves the gateway and forward-auth, which meet
		// rules in order; /v1/check reaches them by name, so without those
		// faces the order may hide rules (config validation allows it).
		if cfg.Gateway != nil || cfg.ForwardAuth != nil {
			hc.Rules = append(hc.Rules, rule)
		}
		var rate []floodgate.Policy
		for _, p := range rule.Policies {
			if p.Unit != floodgate.ConcurrentRequests {
				rate = append(rate, p)
			}
		}
		if len(rate) > 0 {
			ls, err := s.newSet(rate, cfg.FailureMode(i), cfg.Store.LocalShare)
			if err != nil {
				return nil, fmt.Errorf("server: rule %q: %w", r.Name, err)
			}
			st.rules[r.Name] = ls
		}
	}
	if err := s.opsHooks(cfg, &hc); err != nil {
		return nil, err
	}
	if st.mw, err = httplimit.New(hc); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	var rate []floodgate.Policy
	for _, p := range cfg.AllPolicies() {
		st.policies[p.Name] = p
		if p.Unit != floodgate.ConcurrentRequests {
			rate = append(rate, p)
		}
	}
	if len(rate) > 0 {
		if st.all, err = s.newSet(rate, mustMode(cfg.Store.FailureMode), cfg.Store.LocalShare); err != nil {
			return nil, err
		}
	}
	st.auth = st.mw.Wrap(http.HandlerFunc(allowed))
	if g := cfg.Gateway; g != nil {
		target := g.Upstream
		if target == config.Demo || s.demoOnly {
			if s.demo == nil {
				if s.demo, err = startDemo(s.logger); err != nil {
					return nil, err
				}
			}
			target = s.demo.url
		}
		u, err := url.Parse(target)
		if err != nil {
			return nil, fmt.Errorf("server: gateway.upstream: %w", err)
		}
		st.gateway = st.mw.Wrap(s.newProxy(u, g, st.resolver))
	}
	return st, nil
}

func mustMode(s string) floodgate.FailureMode {
	m, _ := floodgate.ParseFailureMode(s)
	return m
}

// newSet builds a Limiter over policies with a failure mode.
func (s *Server) newSet(policies []floodgate.Policy, mode floodgate.FailureMode, share float64) (*limiterSet, error) {
	opts := []floodgate.Option{floodgate.WithFailureMode(mode), floodgate.WithLogger(s.logger)}
	if mode == floodgate.FailToLocal {
		opts = append(opts, floodgate.WithLocalFallback(s.local, share))
	}
	l, err := floodgate.NewLimiter(s.store, policies, opts...)
	if err != nil {
		return nil, err
	}
	ls := &limiterSet{l: l}
	for _, p := range policies {
		ls.names = append(ls.names, p.Name)
	}
	field, err := httplimit.PolicyField(policies)
	if err != nil {
		return nil, err
	}
	ls.policyField = []string{field}
	return ls, nil
}

// set returns the limiter for an API caller's list of policy names,
// building it on first use. At most maxSets lists are kept: beyond them a
// limiter is built for the one call, which is slower but bounded.
func (s *Server) set(st *state, names []string) (*limiterSet, error) {
	key := strings.Join(names, "\x00")
	st.mu.Lock()
	ls, ok := st.sets[key]
	st.mu.Unlock()
	if ok {
		return ls, nil
	}
	ps := make([]floodgate.Policy, 0, len(names))
	for _, n := range names {
		p, ok := st.policies[n]
		if !ok {
			return nil, fmt.Errorf("unknown policy %q (defined: %s)", n, strings.Join(sortedNames(st.policies), ", "))
		}
		if p.Unit == floodgate.ConcurrentRequests {
			return nil, fmt.Errorf("policy %q counts concurrent requests, which a check cannot hold; use it in the gateway or forward-auth", n)
		}
		ps = append(ps, p)
	}
	// NewLimiter runs floodgate.ValidatePolicies, which catches a name
	// given twice.
	ls, err := s.newSet(ps, mustMode(st.cfg.Store.FailureMode), st.cfg.Store.LocalShare)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), floodgate.ErrInvalidPolicy.Error()+": "))
	}
	st.mu.Lock()
	if len(st.sets) < maxSets {
		st.sets[key] = ls
	}
	st.mu.Unlock()
	return ls, nil
}

const maxSets = 1024

// rule compiles rule i of cfg for the middleware.
func (s *Server) rule(cfg *config.Config, st *state, i int) (httplimit.Rule, error) {
	r := cfg.Rules[i]
	mode, _ := httplimit.ParseMode(r.Mode)
	hr := httplimit.Rule{
		Name:        r.Name,
		Pattern:     r.Match,
		Policies:    cfg.RulePolicies(i),
		Mode:        mode,
		MaxDelay:    r.MaxDelay.D(),
		FailureMode: cfg.FailureMode(i),
		LocalShare:  cfg.Store.LocalShare,
	}
	if c := r.Cost; c != 1 {
		hr.Cost = func(*http.Request) (int64, error) { return c, nil }
	}
	parts, err := config.ParseKey(r.Key)
	if err != nil {
		return hr, fmt.Errorf("server: rule %q: %w", r.Name, err)
	}
	for _, p := range parts {
		hr.Key = append(hr.Key, keyPart(p, cfg.Identity, st.resolver))
	}
	return hr, nil
}

// keyPart maps a template part to the middleware's key function.
func keyPart(p config.KeyPart, id config.Identity, res *clientip.Resolver) httplimit.KeyPart {
	switch p.Kind {
	case config.KeyIP:
		return httplimit.ClientIP()
	case config.KeyRoute:
		return httplimit.Route()
	case config.KeyMethod:
		return httplimit.Method()
	case config.KeyHost:
		return httplimit.Host()
	case config.KeyHeader:
		return httplimit.Header(p.Arg)
	case config.KeyAPIKey:
		h := p.Arg
		if h == "" {
			h = id.APIKeyHeader
		}
		return httplimit.APIKey(h)
	case config.KeyUser:
		return trustedHeader(id.UserHeader, res)
	case config.KeyTenant:
		return trustedHeader(id.TenantHeader, res)
	}
	return httplimit.Literal(p.Arg)
}

// trustedHeader reads a header only when the peer is a trusted proxy: an
// identity header is worth something only when an auth layer in front set
// it, and a client talking to Floodgate directly could write any value.
func trustedHeader(name string, res *clientip.Resolver) httplimit.KeyPart {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request, _ httplimit.Info) string {
		if _, trusted := res.Peer(r); !trusted {
			return ""
		}
		return r.Header.Get(name)
	}
}

func sortedNames(m map[string]floodgate.Policy) []string { return slices.Sorted(maps.Keys(m)) }

// allowed is the forward-auth answer for a request the rules let through.
func allowed(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
