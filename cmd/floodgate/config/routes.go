package config

import (
	"fmt"
	"net/url"
	"strings"
)

// Route sends the gateway's requests for a host, a path prefix or both to
// an upstream of its own. Routes are tried in order and the first that
// matches wins; a request no route matches goes to gateway.upstream. The
// rules apply before routing, whatever the upstream.
type Route struct {
	// Host matches the request's host (without port), without regard to
	// case; "" matches any.
	Host string `yaml:"host"`
	// PathPrefix matches paths starting with it ("/billing/" matches
	// "/billing/x", not "/billing"); "" matches any. The path goes
	// upstream unchanged.
	PathPrefix string `yaml:"path_prefix"`
	// Upstream is the URL to proxy to, as gateway.upstream. Required.
	Upstream string `yaml:"upstream"`
	// Timeout bounds the wait for this upstream's response headers;
	// default gateway.timeout.
	Timeout Duration `yaml:"timeout"`
}

func (v *validator) routes(g *Gateway) {
	for i := range g.Routes {
		r := &g.Routes[i]
		f := fmt.Sprintf("gateway.routes[%d]", i)
		if r.Host == "" && r.PathPrefix == "" {
			v.fail(f, "give host, path_prefix or both: a route matching everything hides gateway.upstream and every later route")
		}
		if r.PathPrefix != "" && !strings.HasPrefix(r.PathPrefix, "/") {
			v.fail(f+".path_prefix", "must start with \"/\", got %q", r.PathPrefix)
		}
		if strings.ContainsAny(r.Host, "/:") {
			v.fail(f+".host", "a host name without scheme, port or path, got %q", r.Host)
		}
		if u, err := url.Parse(r.Upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.fail(f+".upstream", "want an http:// or https:// URL with a host; got %q", redacted(r.Upstream))
		}
		switch {
		case !v.has(f + ".timeout"):
			r.Timeout = g.Timeout
		case r.Timeout < 0:
			v.fail(f+".timeout", "must not be negative")
		}
	}
}
