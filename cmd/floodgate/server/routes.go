package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/pattern"
)

// upstreamRoute is one of gateway.routes, compiled.
type upstreamRoute struct {
	host, prefix string
	proxy        http.Handler
}

// router sends a request to the first route that matches its host and
// path, else to the default upstream (gateway.upstream).
type router struct {
	routes []upstreamRoute
	def    http.Handler
}

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := ""
	for i := range rt.routes {
		c := &rt.routes[i]
		if c.host != "" {
			if host == "" {
				host = strings.ToLower(pattern.HostOnly(r.Host))
			}
			if host != c.host {
				continue
			}
		}
		if strings.HasPrefix(r.URL.Path, c.prefix) {
			c.proxy.ServeHTTP(w, r)
			return
		}
	}
	rt.def.ServeHTTP(w, r)
}

// routed puts gateway.routes in front of def; def alone without routes.
func (s *Server) routed(g *config.Gateway, st *state, def http.Handler) (http.Handler, error) {
	if len(g.Routes) == 0 {
		return def, nil
	}
	rt := &router{def: def}
	for i, r := range g.Routes {
		u, err := url.Parse(r.Upstream)
		if err != nil {
			return nil, fmt.Errorf("server: gateway.routes[%d].upstream: %w", i, err)
		}
		proxy := s.proxyFor(u, g, st.resolver, s.routeTransport(r.Timeout.D()))
		rt.routes = append(rt.routes, upstreamRoute{host: strings.ToLower(r.Host), prefix: r.PathPrefix, proxy: proxy})
	}
	return rt, nil
}

// routeTransport is the transport of routes whose upstreams answer
// within timeout: one per timeout, kept for the life of the process so
// that idle connections survive reloads.
func (s *Server) routeTransport(timeout time.Duration) *http.Transport {
	if s.routeTransports == nil {
		s.routeTransports = map[time.Duration]*http.Transport{}
	}
	t, ok := s.routeTransports[timeout]
	if !ok {
		t = newTransport()
		t.ResponseHeaderTimeout = timeout
		s.routeTransports[timeout] = t
	}
	return t
}
