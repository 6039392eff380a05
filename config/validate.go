package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clientip"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
)

func reflectValue(c *Config) reflect.Value { return reflect.ValueOf(c).Elem() }

// validator checks a decoded Config, fills defaults and compiles policies,
// adding every problem to the decoder's list.
type validator struct {
	*decoder
	cfg *Config
}

// fail records a problem at field, using the line of the field or of its
// nearest enclosing field that has one.
func (v *validator) fail(field, format string, args ...any) {
	for _, e := range v.errs {
		if e.Field == field || strings.HasPrefix(field, e.Field+".") || strings.HasPrefix(field, e.Field+"[") {
			return // the decoder already said what is wrong with this value
		}
	}
	v.errorf(v.line(field), field, format, args...)
}

func (v *validator) line(field string) int {
	for p := field; p != ""; {
		if l, ok := v.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

func (v *validator) has(field string) bool { _, ok := v.lines[field]; return ok }

func (v *validator) validate() {
	c := v.cfg
	v.faces()
	v.store()
	v.breaker()
	v.policies()
	v.rules()
	v.unreachable()
	v.ops()
	v.envoyRLS() // after faces: its listener must not be theirs
	for i, s := range c.Skip {
		if err := httplimit.ValidPattern(s); err != nil {
			v.fail(fmt.Sprintf("skip[%d]", i), "%v", err)
		}
	}
	if c.Bypass.Header == "" {
		c.Bypass.Header = DefaultBypassHeader
	} else if !header.IsToken(c.Bypass.Header) {
		v.fail("bypass.header", "%q is not a header name", c.Bypass.Header)
	}
	for i, t := range c.Bypass.Tokens {
		if t == "" {
			v.fail(fmt.Sprintf("bypass.tokens[%d]", i), "empty token (is its environment variable empty?)")
		}
	}
	for i, s := range c.Bypass.CIDRs {
		if _, err := clientip.ParsePrefix(s); err != nil {
			v.fail(fmt.Sprintf("bypass.cidrs[%d]", i), "bad address or CIDR %q", s)
		}
	}
	for i, s := range c.TrustedProxies {
		if _, err := clientip.ParsePrefix(s); err != nil {
			v.fail(fmt.Sprintf("trusted_proxies[%d]", i), "bad address or CIDR %q", s)
		}
	}
	for i, h := range c.ClientIP.Headers {
		if _, err := ParseSource(h); err != nil {
			v.fail(fmt.Sprintf("client_ip.headers[%d]", i), "%v", err)
		}
	}
	if p := c.ClientIP.IPv6Prefix; p < 0 || p > 128 {
		v.fail("client_ip.ipv6_prefix", "%d is outside 1..128 (0 keys by whole address)", p)
	}
	id := &c.Identity
	for _, f := range []struct {
		name string
		val  *string
		def  string
	}{{"api_key_header", &id.APIKeyHeader, DefaultAPIKeyHeader}, {"user_header", &id.UserHeader, DefaultUserHeader}, {"tenant_header", &id.TenantHeader, DefaultTenantHeader}} {
		if *f.val == "" {
			*f.val = f.def
		} else if !header.IsToken(*f.val) {
			v.fail("identity."+f.name, "%q is not a header name", *f.val)
		}
	}
	if _, err := engine.ParseHeaderStyle(c.Headers.Style); err != nil {
		v.fail("headers.style", "unknown style %q (want both, draft11, legacy or none)", c.Headers.Style)
	}
	if c.Headers.Style == "" {
		c.Headers.Style = "both"
	}
	switch c.Headers.Reset {
	case "":
		c.Headers.Reset = "epoch"
	case "epoch", "delta":
	default:
		v.fail("headers.reset", "unknown reset style %q (want epoch or delta)", c.Headers.Reset)
	}
	switch w := c.Headers.WarnAt; {
	case w == 0:
		c.Headers.WarnAt = DefaultWarnAt
	case w > 1:
		v.fail("headers.warn_at", "%v is above 1 (a share of the quota; negative never warns)", w)
	}
	switch {
	case !v.has("shutdown_timeout"):
		c.ShutdownTimeout = Duration(DefaultShutdownTimeout)
	case c.ShutdownTimeout < 0:
		v.fail("shutdown_timeout", "must not be negative")
	}
	switch c.Log.Level {
	case "":
		c.Log.Level = "info"
	case "debug", "info", "warn", "error":
	default:
		v.fail("log.level", "unknown level %q (want debug, info, warn or error)", c.Log.Level)
	}
	switch c.Log.Format {
	case "":
		c.Log.Format = "text"
	case "text", "json":
	default:
		v.fail("log.format", "unknown format %q (want text or json)", c.Log.Format)
	}
	v.security() // after faces and rules: callers name rules
	v.tiers()    // after identity: a rule's tiers.header defaults to its api_key_header
}

func (v *validator) faces() {
	c := v.cfg
	if c.Gateway == nil && c.API == nil && c.ForwardAuth == nil && c.EnvoyRLS == nil {
		v.errorf(0, "", "no face is switched on: configure at least one of gateway, api, forward_auth and envoy_rls")
	}
	type listener struct{ face, field, addr string }
	var ls []listener
	if g := c.Gateway; g != nil {
		if v.listen("gateway.listen", g.Listen) {
			ls = append(ls, listener{"gateway", "gateway.listen", g.Listen})
		}
		switch {
		case g.Upstream == "":
			v.fail("gateway.upstream", "required: the URL to proxy to, or \"demo\"")
		case g.Upstream == Demo:
		default:
			u, err := url.Parse(g.Upstream)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				v.fail("gateway.upstream", "want an http:// or https:// URL with a host, or \"demo\"; got %q", g.Upstream)
			}
		}
		switch {
		case !v.has("gateway.timeout"):
			g.Timeout = Duration(DefaultUpstreamTimeout)
		case g.Timeout < 0:
			v.fail("gateway.timeout", "must not be negative")
		}
	}
	if a := c.API; a != nil {
		if v.listen("api.listen", a.Listen) {
			ls = append(ls, listener{"api", "api.listen", a.Listen})
		}
		if !v.has("api.max_cost") {
			a.MaxCost = DefaultMaxCost
		} else if a.MaxCost < 1 {
			v.fail("api.max_cost", "must be at least 1, got %d", a.MaxCost)
		}
		if !v.has("api.max_batch") {
			a.MaxBatch = DefaultMaxBatch
		} else if a.MaxBatch < 1 || a.MaxBatch > 10_000 {
			v.fail("api.max_batch", "must be within 1..10000, got %d", a.MaxBatch)
		}
		if !v.has("api.max_key_length") {
			a.MaxKeyLength = DefaultMaxKeyLength
		} else if a.MaxKeyLength < 1 || a.MaxKeyLength > 1<<16 {
			v.fail("api.max_key_length", "must be within 1..65536, got %d", a.MaxKeyLength)
		}
	}
	if f := c.ForwardAuth; f != nil {
		if v.listen("forward_auth.listen", f.Listen) {
			ls = append(ls, listener{"forward_auth", "forward_auth.listen", f.Listen})
		}
		if len(c.TrustedProxies) == 0 {
			v.fail("forward_auth", "forward-auth answers only trusted proxies: list your proxy's address in trusted_proxies")
		}
	}
	if c.Admin.Listen == "" {
		c.Admin.Listen = DefaultAdminListen
	}
	if c.Admin.Listen != Off && v.listen("admin.listen", c.Admin.Listen) {
		ls = append(ls, listener{"admin", "admin.listen", c.Admin.Listen})
	}
	// The gateway proxies every path, so it cannot share a listener; the
	// other faces have disjoint paths and may.
	for i, a := range ls {
		for _, b := range ls[:i] {
			if sameAddr(a.addr, b.addr) && (a.face == "gateway" || b.face == "gateway") {
				v.fail(a.field, "%s is also %s's address; the gateway needs a listener of its own", a.addr, b.field)
			}
		}
	}
}

func sameAddr(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	if pa != pb || pa == "0" {
		return false
	}
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wild(ha) || wild(hb)
}

// listen checks a listen address and reports whether it is usable.
func (v *validator) listen(field, addr string) bool {
	if addr == "" {
		v.fail(field, "required, e.g. \":8080\" or \"127.0.0.1:8080\"")
		return false
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.fail(field, "want host:port, got %q", addr)
		return false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.fail(field, "bad port %q in %q", port, addr)
		return false
	}
	if host != "" && host != "localhost" {
		if _, err := netip.ParseAddr(host); err != nil && !validHostname(host) {
			v.fail(field, "bad host %q in %q", host, addr)
			return false
		}
	}
	return true
}

func validHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

func (v *validator) store() {
	s := &v.cfg.Store
	switch s.Type {
	case "":
		s.Type = DefaultStoreType
	case "memory", "redis":
	default:
		v.fail("store.type", "unknown store %q (want memory or redis)", s.Type)
	}
	if s.FailureMode == "" {
		s.FailureMode = floodgate.FailClosed.String()
	} else if _, err := floodgate.ParseFailureMode(s.FailureMode); err != nil {
		v.fail("store.failure_mode", "unknown failure mode %q (want fail-closed, fail-open or fail-to-local)", s.FailureMode)
	}
	if !v.has("store.local_share") {
		s.LocalShare = 1
	} else if s.LocalShare <= 0 || s.LocalShare > 1 {
		v.fail("store.local_share", "must be within (0, 1], got %v", s.LocalShare)
	}
	if !v.has("store.memory.max_keys") {
		s.Memory.MaxKeys = DefaultMemoryMaxKeys
	} else if s.Memory.MaxKeys < 1 {
		v.fail("store.memory.max_keys", "must be at least 1, got %d", s.Memory.MaxKeys)
	}
	r := &s.Redis
	if s.Type != "redis" {
		if v.has("store.redis") {
			v.fail("store.redis", "store.type is %q, so this section is unused; set store.type: redis", s.Type)
		}
		return
	}
	n := 0
	if r.URL != "" {
		n++
		if _, err := redis.ParseURL(r.URL); err != nil {
			v.fail("store.redis.url", "%v (want redis://[user:password@]host:port[/db], or rediss:// for TLS)", err)
		}
	}
	if len(r.Cluster) > 0 {
		n++
		for i, a := range r.Cluster {
			if _, _, err := net.SplitHostPort(a); err != nil {
				v.fail(fmt.Sprintf("store.redis.cluster[%d]", i), "want host:port, got %q", a)
			}
		}
	}
	if r.Sentinel != nil {
		n++
		if r.Sentinel.Master == "" {
			v.fail("store.redis.sentinel.master", "required: the master's name as the Sentinels know it")
		}
		if len(r.Sentinel.Addrs) == 0 {
			v.fail("store.redis.sentinel.addrs", "required: at least one Sentinel host:port")
		}
		for i, a := range r.Sentinel.Addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				v.fail(fmt.Sprintf("store.redis.sentinel.addrs[%d]", i), "want host:port, got %q", a)
			}
		}
	}
	if n != 1 {
		v.fail("store.redis", "give exactly one of url, cluster and sentinel (found %d)", n)
	}
	if !v.has("store.redis.timeout") {
		r.Timeout = Duration(DefaultRedisTimeout)
	} else if r.Timeout <= 0 {
		v.fail("store.redis.timeout", "must be positive")
	}
	if !v.has("store.redis.prefix") {
		r.Prefix = DefaultRedisPrefix
	} else if strings.ContainsAny(r.Prefix, "{}") {
		v.fail("store.redis.prefix", "must not contain '{' or '}' (they would take the hash tag's place)")
	}
	if !v.has("store.redis.near_cache") {
		r.NearCache = DefaultNearCache
	} else if r.NearCache < 0 {
		v.fail("store.redis.near_cache", "must not be negative")
	}
}

func (v *validator) policies() {
	c := v.cfg
	c.policies = map[string]floodgate.Policy{}
	c.caps = map[string]floodgate.Concurrency{}
	for _, name := range sortedKeys(c.Policies) {
		spec := c.Policies[name]
		f := "policies." + name
		if spec.Unit == header.UnitConcurrentRequests {
			v.concurrency(name, spec)
			continue
		}
		p := floodgate.Policy{Name: name, Quota: spec.Quota, Window: spec.Window.D(), Burst: spec.Burst}
		ok := true
		bad := func(field, format string, args ...any) {
			v.fail(f+field, format, args...)
			ok = false
		}
		if !validName(name) {
			bad("", "bad policy name: use 1–64 letters, digits, '_', '-' or '.'")
		}
		var err error
		if spec.Algorithm == "" {
			p.Algorithm = floodgate.SlidingWindowCounter
		} else if p.Algorithm, err = floodgate.ParseAlgorithm(spec.Algorithm); err != nil {
			bad(".algorithm", "unknown algorithm %q (want fixed-window, sliding-window-log, sliding-window-counter, token-bucket or gcra)", spec.Algorithm)
		}
		if p.Unit, err = floodgate.ParseUnit(spec.Unit); err != nil {
			bad(".unit", "unknown unit %q (want requests, content-bytes or concurrent-requests)", spec.Unit)
		}
		if !v.has(f + ".quota") {
			bad("", "quota is required")
		} else if spec.Quota <= 0 {
			bad(".quota", "must be positive, got %d", spec.Quota)
		}
		switch {
		case !v.has(f + ".window"):
			bad("", "window is required, e.g. window: 1m")
		case spec.Window.D() < time.Millisecond:
			bad(".window", "must be at least 1ms, got %v", spec.Window.D())
		}
		switch {
		case !v.has(f + ".burst"):
		case p.Algorithm != floodgate.TokenBucket && p.Algorithm != floodgate.GCRA && p.Algorithm != 0:
			bad(".burst", "applies to token-bucket and gcra only, not %s (use a second, shorter policy for a burst limit)", p.Algorithm)
		case spec.Burst < 0:
			bad(".burst", "must not be negative, got %d", spec.Burst)
		case spec.Burst == 0:
			// The library reads Burst 0 as "= quota"; written out, it more
			// likely means nginx's burst=0, requests evenly spaced.
			bad(".burst", "must be at least 1 (it is the bucket size): burst: 1 spaces requests evenly, like nginx's burst=0; leave it out for burst = quota")
		}
		if ok {
			if err := p.Validate(); err != nil {
				bad("", "%s", strings.TrimPrefix(err.Error(), floodgate.ErrInvalidPolicy.Error()+": "))
				continue
			}
			c.policies[name] = p
		}
	}
}

// concurrency compiles a policy of unit concurrent-requests: an in-flight
// cap, with a name and a quota only.
func (v *validator) concurrency(name string, spec PolicySpec) {
	f := "policies." + name
	c := floodgate.Concurrency{Name: name, Max: spec.Quota}
	ok := true
	if !validName(name) {
		v.fail(f, "bad policy name: use 1–64 letters, digits, '_', '-' or '.'")
		ok = false
	}
	if !v.has(f + ".quota") {
		v.fail(f, "quota is required")
		ok = false
	} else if spec.Quota <= 0 {
		v.fail(f+".quota", "must be positive, got %d", spec.Quota)
		ok = false
	}
	for _, field := range []string{"algorithm", "burst"} {
		if v.has(f + "." + field) {
			v.fail(f+"."+field, "a concurrent-requests policy counts requests in flight: it has no %s", field)
			ok = false
		}
	}
	if ok {
		v.cfg.caps[name] = c
	}
}

// unreachable refuses a rule that no request through the gateway or
// forward-auth can reach: skips (top-level, or rules with skip: true,
// wherever they stand) are checked before every rule, then the rules in
// order, the first match winning. Without those faces, rules are reached by
// name through the decision API only, and their order does not matter.
func (v *validator) unreachable() {
	c := v.cfg
	if c.Gateway == nil && c.ForwardAuth == nil {
		return
	}
	type cover struct{ match, where string }
	var skips, earlier []cover
	for i, s := range c.Skip {
		skips = append(skips, cover{s, fmt.Sprintf("skip[%d]", i)})
	}
	for i, r := range c.Rules {
		if r.Skip {
			skips = append(skips, cover{r.Match, fmt.Sprintf("rules[%d], a skip rule,", i)})
		}
	}
	for i, r := range c.Rules {
		if r.Skip {
			continue
		}
		for j, cv := range slices.Concat(skips, earlier) {
			if !httplimit.Covers(cv.match, r.Match) {
				continue
			}
			advice := "put the narrower rule first"
			switch {
			case j < len(skips):
				advice = "skips are checked before every rule"
			case httplimit.Covers(r.Match, cv.match):
				advice = "the two match the same requests: remove or merge one"
			}
			v.fail(fmt.Sprintf("rules[%d].match", i), "never reached through the gateway or forward-auth: %s (match %q) matches every request this rule does; %s", cv.where, cv.match, advice)
			break
		}
		earlier = append(earlier, cover{r.Match, fmt.Sprintf("rules[%d]", i)})
	}
}

func (v *validator) rules() {
	c := v.cfg
	names := map[string]int{}
	for i := range c.Rules {
		r := &c.Rules[i]
		f := fmt.Sprintf("rules[%d]", i)
		r.line = v.line(f)
		if r.Match == "" {
			v.fail(f, "match is required, e.g. match: \"POST /login\"")
		} else if err := httplimit.ValidPattern(r.Match); err != nil {
			v.fail(f+".match", "%v", err)
		}
		if r.Name == "" {
			r.Name = r.Match
		}
		if j, dup := names[r.Name]; dup && r.Name != "" {
			v.fail(f+".name", "rule name %q is also rules[%d]'s; names must be unique (they label metrics and the decision API)", r.Name, j)
		}
		names[r.Name] = i
		if r.Skip {
			if len(r.Policies) > 0 {
				v.fail(f+".policies", "a skip rule limits nothing; remove policies or skip")
			}
			continue
		}
		if r.Key == "" {
			r.Key = DefaultKey
		} else if _, err := ParseKey(r.Key); err != nil {
			v.fail(f+".key", "%v", err)
		}
		if len(r.Policies) == 0 {
			v.fail(f, "policies is required: name at least one policy")
		}
		if !v.has(f + ".cost") {
			r.Cost = 1
		} else if r.Cost < 1 {
			v.fail(f+".cost", "must be at least 1, got %d", r.Cost)
		}
		seen := map[string]bool{}
		for j, name := range r.Policies {
			pf := fmt.Sprintf("%s.policies[%d]", f, j)
			if seen[name] {
				v.fail(pf, "policy %q listed twice", name)
				continue
			}
			seen[name] = true
			p, ok := c.policies[name]
			if _, isCap := c.caps[name]; !ok && !isCap {
				if _, defined := c.Policies[name]; !defined {
					v.fail(pf, "unknown policy %q%s", name, knownPolicies(name, c.Policies))
				}
				continue
			}
			if ok && p.Unit == floodgate.Requests && r.Cost > p.Capacity() {
				v.fail(f+".cost", "cost %d can never pass policy %q, which admits at most %d at once", r.Cost, name, p.Capacity())
			}
		}
		mode, err := engine.ParseMode(r.Mode)
		if err != nil {
			v.fail(f+".mode", "unknown mode %q (want enforce, shadow or throttle)", r.Mode)
		}
		if r.Mode == "" {
			r.Mode = "enforce"
		}
		if mode == engine.Throttle && r.MaxDelay <= 0 {
			v.fail(f+".max_delay", "throttle mode needs a positive max_delay, e.g. 2s")
		}
		if r.MaxDelay < 0 {
			v.fail(f+".max_delay", "must not be negative")
		}
		if r.FailureMode != "" {
			if _, err := floodgate.ParseFailureMode(r.FailureMode); err != nil {
				v.fail(f+".failure_mode", "unknown failure mode %q (want fail-closed, fail-open or fail-to-local)", r.FailureMode)
			}
		}
	}
}

// FailureMode returns rule i's failure mode: its own, else the store's.
func (c *Config) FailureMode(i int) floodgate.FailureMode {
	s := c.Rules[i].FailureMode
	if s == "" {
		s = c.Store.FailureMode
	}
	m, _ := floodgate.ParseFailureMode(s)
	return m
}

// validName reports whether name is a valid policy name; tier names follow
// the same rule. floodgate keeps its check unexported, so a policy that
// differs only in name asks it.
func validName(name string) bool {
	return floodgate.Policy{Name: name, Algorithm: floodgate.GCRA, Quota: 1, Window: time.Second}.Validate() == nil
}

// ParseSource maps a client_ip.headers entry to a clientip.Source.
func ParseSource(s string) (clientip.Source, error) {
	switch strings.ToLower(s) {
	case "x-forwarded-for":
		return clientip.XForwardedFor, nil
	case "forwarded":
		return clientip.Forwarded, nil
	case "x-real-ip":
		return clientip.XRealIP, nil
	case "cf-connecting-ip":
		return clientip.CFConnectingIP, nil
	}
	return 0, fmt.Errorf("unknown client address header %q (want x-forwarded-for, forwarded, x-real-ip or cf-connecting-ip)", s)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
