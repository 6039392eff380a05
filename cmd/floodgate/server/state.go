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
	"sync/atomic"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clientip"
	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/envoyrls"
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

	fields engine.Fields // the decision API's fields, as the middleware writes them

	// Every door decides a rule through its one compiled form: the
	// gateway and forward-auth through the middleware, the decision API
	// by name.
	rules    map[string]*engine.Compiled
	policies map[string]floodgate.Policy
	all      *engine.Compiled // every rate policy, for peek and reset

	mu   sync.Mutex
	sets map[string]*engine.Compiled // policy lists asked for by the API

	// rls is the envoy_rls face's descriptors, from its files and xDS;
	// nil when off (rls.go). A snapshot swaps it alone (xds.go).
	rls atomic.Pointer[envoyrls.Rules]
}

func (s *Server) build(cfg *config.Config) (*state, error) {
	st := &state{cfg: cfg, rules: map[string]*engine.Compiled{}, sets: map[string]*engine.Compiled{}, policies: map[string]floodgate.Policy{}}
	var err error
	if st.resolver, err = resolver(cfg); err != nil {
		return nil, err
	}
	st.fields.Style = cfg.Headers.Style
	st.fields.Reset = header.ResetEpoch
	if cfg.Headers.Reset == "delta" {
		st.fields.Reset = header.ResetDelta
	}
	st.fields.WarnAt = cfg.Headers.WarnAt
	hc, err := s.middlewareConfig(cfg, st)
	if err != nil {
		return nil, err
	}
	if err := s.abuseHooks(cfg); err != nil {
		return nil, err
	}
	if st.mw, err = httplimit.New(hc); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.declareRules(cfg)
	var rate []floodgate.Policy
	for _, p := range cfg.AllPolicies() {
		st.policies[p.Name] = p
		rate = append(rate, p)
	}
	if len(rate) > 0 {
		st.all, err = s.eng.Compile(cfg.PolicySet("(all policies)", rate))
		if err != nil {
			return nil, err
		}
	}
	rls, err := s.buildRLS(cfg)
	if err != nil {
		return nil, err
	}
	st.rls.Store(rls)
	st.auth = st.mw.Wrap(http.HandlerFunc(allowed))
	if st.gateway, err = s.gatewayFor(cfg, st); err != nil {
		return nil, err
	}
	return st, nil
}

// resolver builds the client address resolver of cfg.
func resolver(cfg *config.Config) (*clientip.Resolver, error) {
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
	r, err := clientip.New(ccfg)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return r, nil
}

// middlewareConfig compiles cfg's rules into st.rules and gives the
// middleware those the gateway and forward-auth serve.
func (s *Server) middlewareConfig(cfg *config.Config, st *state) (httplimit.Config, error) {
	hc := httplimit.Config{
		Engine:             s.eng,
		Skip:               append([]string(nil), cfg.Skip...),
		ClientIP:           st.resolver,
		Headers:            st.fields.Style,
		ResetStyle:         st.fields.Reset,
		WarnAt:             st.fields.WarnAt,
		Logger:             s.logger,
		RefusalLogInterval: cfg.Log.RefusalInterval.D(),
		Bypass:             httplimit.Bypass{Header: cfg.Bypass.Header, Tokens: cfg.Bypass.Tokens},
	}
	for _, c := range cfg.Bypass.CIDRs {
		p, err := clientip.ParsePrefix(c)
		if err != nil {
			return hc, err
		}
		hc.Bypass.CIDRs = append(hc.Bypass.CIDRs, p)
	}
	keys, err := s.tierSource(cfg)
	if err != nil {
		return hc, err
	}
	for i, r := range cfg.Rules {
		if r.Skip {
			hc.Skip = append(hc.Skip, r.Match)
			continue
		}
		rule, err := s.rule(cfg, st, i)
		if err != nil {
			return hc, err
		}
		st.rules[r.Name] = rule.Limits
		if r.Tiers != nil {
			rule.Plan = tierPlan(cfg, i, keys)
		}
		// The middleware serves the gateway and forward-auth, which meet
		// rules in order; /v1/check reaches them by name, so without those
		// faces the order may hide rules (config validation allows it).
		if cfg.Gateway != nil || cfg.ForwardAuth != nil {
			hc.Rules = append(hc.Rules, rule)
		}
	}
	return hc, nil
}

// gatewayFor returns the gateway's handler, or nil when cfg has none.
func (s *Server) gatewayFor(cfg *config.Config, st *state) (http.Handler, error) {
	g := cfg.Gateway
	if g == nil {
		return nil, nil
	}
	target := g.Upstream
	if target == config.Demo || s.demoOnly {
		if s.demo == nil {
			var err error
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
	h, err := s.routed(g, st, s.newProxy(u, g, st.resolver))
	if err != nil {
		return nil, err
	}
	return st.mw.Wrap(h), nil
}

// set returns the compiled rule for an API caller's list of policy
// names, building it on first use. At most maxSets lists are kept: beyond
// them a rule is compiled for the one call, which is slower but bounded.
// Every such rule is named "(policies)": metric labels and events carry
// names from the configuration only, never what a caller sent.
func (s *Server) set(st *state, names []string) (*engine.Compiled, error) {
	key := strings.Join(names, "+")
	st.mu.Lock()
	c, ok := st.sets[key]
	st.mu.Unlock()
	if ok {
		return c, nil
	}
	ps := make([]floodgate.Policy, 0, len(names))
	for _, n := range names {
		p, ok := st.policies[n]
		if !ok {
			if isCap(st.cfg, n) {
				return nil, fmt.Errorf("policy %q counts concurrent requests, which a check cannot hold; use it in a rule", n)
			}
			return nil, fmt.Errorf("unknown policy %q (defined: %s)", n, strings.Join(sortedNames(st.policies), ", "))
		}
		ps = append(ps, p)
	}
	// Compile runs floodgate.ValidatePolicies, which catches a name given
	// twice.
	c, err := s.eng.Compile(st.cfg.PolicySet(adhocRule, ps))
	if err != nil {
		var pe *floodgate.PolicyError
		if errors.As(err, &pe) {
			return nil, errors.New(pe.Detail())
		}
		return nil, err
	}
	st.mu.Lock()
	if len(st.sets) < maxSets {
		st.sets[key] = c
	}
	st.mu.Unlock()
	return c, nil
}

// isCap reports whether name is a concurrent-requests policy of cfg.
func isCap(cfg *config.Config, name string) bool {
	spec, ok := cfg.Policies[name]
	return ok && spec.Unit == header.UnitConcurrentRequests
}

const maxSets = 1024

// adhocRule names the rules of policy lists checked through the API.
const adhocRule = "(policies)"

// rule compiles rule i of cfg for the middleware.
func (s *Server) rule(cfg *config.Config, st *state, i int) (httplimit.Rule, error) {
	r := cfg.Rules[i]
	compiled, err := s.eng.Compile(cfg.EngineRule(i))
	if err != nil {
		return httplimit.Rule{}, fmt.Errorf("server: %w", err)
	}
	hr := httplimit.Rule{Rule: engine.Rule{Name: r.Name}, Pattern: r.Match, Limits: compiled, CostHeader: r.CostHeader}
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
