package config

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// listener is a face's listen address, for the check that the gateway
// has one of its own.
type listener struct{ face, field, addr string }

func (v *validator) faces() {
	c := v.cfg
	if c.Gateway == nil && c.API == nil && c.ForwardAuth == nil && c.EnvoyRLS == nil && c.RLQS == nil {
		v.errorf(0, "", "no face is switched on: configure at least one of gateway, api, forward_auth, envoy_rls and rlqs")
	}
	var ls []listener
	add := func(face, addr string) {
		if v.listen(face+".listen", addr) {
			ls = append(ls, listener{face, face + ".listen", addr})
		}
	}
	if g := c.Gateway; g != nil {
		add("gateway", g.Listen)
		v.gateway(g)
	}
	if a := c.API; a != nil {
		add("api", a.Listen)
		v.api(a)
	}
	if f := c.ForwardAuth; f != nil {
		add("forward_auth", f.Listen)
		if len(c.TrustedProxies) == 0 {
			v.fail("forward_auth", "forward-auth answers only trusted proxies: list your proxy's address in trusted_proxies")
		}
	}
	if c.Admin.Listen == "" {
		c.Admin.Listen = DefaultAdminListen
	}
	if c.Admin.Listen != Off {
		add("admin", c.Admin.Listen)
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

func (v *validator) gateway(g *Gateway) {
	switch {
	case g.Upstream == "":
		v.fail("gateway.upstream", "required: the URL to proxy to, or \"demo\"")
	case g.Upstream == Demo:
	default:
		u, err := url.Parse(g.Upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.fail("gateway.upstream", "want an http:// or https:// URL with a host, or \"demo\"; got %q", redacted(g.Upstream))
		}
	}
	switch {
	case !v.has("gateway.timeout"):
		g.Timeout = Duration(DefaultUpstreamTimeout)
	case g.Timeout < 0:
		v.fail("gateway.timeout", "must not be negative")
	}
	v.routes(g)
}

func (v *validator) api(a *API) {
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
