package server

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/floodgate/floodgate/header"
)

// handleAuth answers a forward-auth subrequest: it rebuilds the original
// request from the proxy's X-Original-* / X-Forwarded-* headers, runs the
// rules on it and answers 200 or, when limited, 429 with the rate-limit
// fields for the proxy to pass on; while the store fails, 200 with
// Floodgate-Degraded (fail-open, fail-to-local) or 503 with Retry-After
// (fail-closed), the answer the proxy gives the client as it is. In nginx
// mode a limited request gets 403 and a 503 gets 401 instead, since
// auth_request treats any status but 2xx, 401 and 403 as an error (a 500
// for the client); the nginx configuration maps them back to 429 and 503
// (examples/nginx/).
//
// Only trusted proxies are answered: from anyone else those headers are
// the client's own words, and the client would pick its own key (K2).
func (s *Server) handleAuth(w http.ResponseWriter, r *http.Request, nginx bool) {
	st := s.state.Load()
	if _, trusted := st.resolver.Peer(r); !trusted {
		status := http.StatusForbidden
		if nginx {
			status = http.StatusInternalServerError // 403 means "limited" to our nginx setup
		}
		s.m.auth.WithLabelValues("untrusted").Inc()
		s.logger.Warn("forward-auth call from an untrusted peer", "peer", r.RemoteAddr)
		writeProblem(w, status, http.StatusText(status), "forward-auth answers trusted proxies only; add this proxy to trusted_proxies")
		return
	}
	orig, err := originalRequest(r)
	if err != nil {
		s.m.auth.WithLabelValues("bad_request").Inc()
		writeProblem(w, http.StatusBadRequest, "Bad Request", err.Error())
		return
	}
	rec := &authWriter{ResponseWriter: w, nginx: nginx}
	st.auth.ServeHTTP(rec, orig)
	switch {
	case rec.status == http.StatusOK:
		s.m.auth.WithLabelValues("allowed").Inc()
	case rec.status == http.StatusTooManyRequests:
		s.m.auth.WithLabelValues("denied").Inc()
	case rec.status == http.StatusServiceUnavailable:
		s.m.auth.WithLabelValues("unavailable").Inc()
	default:
		s.m.auth.WithLabelValues("error").Inc()
	}
}

// originalRequest is the request the proxy is asking about. The method
// comes from X-Original-Method (nginx) or X-Forwarded-Method (Traefik,
// Caddy), the URI from X-Original-URI or X-Forwarded-Uri, the host from
// X-Forwarded-Host; the client address is left to the trusted-proxy
// resolver, which reads X-Forwarded-For (or the configured headers).
func originalRequest(r *http.Request) (*http.Request, error) {
	h := r.Header
	uri := first(h, "X-Original-Uri", "X-Forwarded-Uri")
	if uri == "" {
		return nil, errors.New("missing X-Original-URI (nginx) or X-Forwarded-Uri (Traefik, Caddy): the proxy must say which request it asks about")
	}
	method := first(h, "X-Original-Method", "X-Forwarded-Method")
	if method == "" {
		// Guessing GET would quietly skip every rule for another method,
		// such as a login limit on POST.
		return nil, errors.New("missing X-Original-Method (nginx) or X-Forwarded-Method (Traefik, Caddy): the proxy must say which request it asks about")
	}
	if !header.IsToken(method) {
		return nil, errors.New("bad original method " + quote(method) + ": a method is a token such as GET or POST (RFC 9110, section 9.1)")
	}
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return nil, errors.New("bad original URI " + quote(uri))
	}
	// A shallow copy: the subrequest is not used again, and the rules only
	// read its headers, so copying them (as Clone does) is wasted work.
	o := r.WithContext(r.Context())
	o.Method = strings.ToUpper(method)
	o.URL = u
	o.RequestURI = uri
	if host := first(h, "X-Original-Host", "X-Forwarded-Host"); host != "" {
		o.Host = host
	}
	o.Body = http.NoBody
	o.ContentLength = 0
	return o, nil
}

func first(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

func quote(s string) string {
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}

// authWriter records the status and, in nginx mode, turns a 429 into 403
// and a 503 (a store failing under fail-closed, a capacity reduction) into
// 401, the only refusals auth_request passes on.
type authWriter struct {
	http.ResponseWriter
	nginx  bool
	status int
}

func (a *authWriter) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
	if a.nginx {
		switch code {
		case http.StatusTooManyRequests:
			code = http.StatusForbidden
		case http.StatusServiceUnavailable:
			code = http.StatusUnauthorized
		}
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *authWriter) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.WriteHeader(http.StatusOK)
	}
	return a.ResponseWriter.Write(b)
}

func (a *authWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }
