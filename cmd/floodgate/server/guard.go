package server

import (
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/secret"
)

// adminAccess is what a request's admin credentials allow.
type adminAccess int

const (
	adminNone adminAccess = iota
	adminRead             // admin.read_token: the read-only endpoints
	adminFull             // admin.token: everything
)

// adminLevel reads the admin token from "Authorization: Bearer <token>" or,
// for a browser on the dashboard, from Basic authentication's password.
func (s *Server) adminLevel(r *http.Request, st *state) adminAccess {
	got, ok := httplimit.BearerToken(r)
	if !ok {
		_, got, ok = r.BasicAuth()
	}
	if !ok {
		return adminNone
	}
	a := st.cfg.Admin
	switch {
	case a.Token != "" && secret.Equal(got, a.Token):
		return adminFull
	case a.ReadToken != "" && secret.Equal(got, a.ReadToken):
		return adminRead
	}
	return adminNone
}

// adminEndpoint is what an admin endpoint gives away or changes.
type adminEndpoint int

const (
	adminCounts  adminEndpoint = iota // /metrics: counts per rule and policy, no keys
	adminReads                        // the dashboard, top offenders, alerts: key fingerprints
	adminChanges                      // reload, resets, blocks, reductions
)

// guardAdmin puts an admin endpoint behind admin.token when one is set;
// the read-only ones (counts and reads) also take admin.read_token.
// Without a token, the counts are open, the reads answer loopback clients
// only (admin.listen may face a network: a container's or a pod's), and
// endpoints that change something refuse by themselves (authorized).
func (s *Server) guardAdmin(kind adminEndpoint, next http.Handler) http.Handler {
	readOnly := kind != adminChanges
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := s.state.Load()
		if st.cfg.Admin.Token == "" {
			if kind == adminReads && !fromLoopback(r) {
				writeProblem(w, http.StatusForbidden, "Forbidden", "without admin.token, the dashboard and the admin reads answer loopback clients only")
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		switch lvl := s.adminLevel(r, st); {
		case lvl == adminFull, lvl == adminRead && readOnly && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			next.ServeHTTP(w, r)
		case lvl == adminRead:
			writeProblem(w, http.StatusForbidden, "Forbidden", "admin.read_token opens the read-only endpoints only; this one needs admin.token")
		default:
			challenge(w)
			writeProblem(w, http.StatusUnauthorized, "Unauthorized", "send the admin token as Authorization: Bearer <token> or, in a browser, as the password of the login prompt")
		}
	})
}

// challenge asks for the admin token twice, as Basic (whose password a
// browser asks for, to open the dashboard) and as Bearer (for scripts), in
// separate WWW-Authenticate fields: RFC 9110 (section 11.6.1) allows both
// challenges in one field, but Chromium reads a single field's first
// challenge only and, finding Bearer, shows the 401 without asking.
func challenge(w http.ResponseWriter) {
	w.Header().Add("WWW-Authenticate", `Basic realm="floodgate-admin", charset="UTF-8"`)
	w.Header().Add("WWW-Authenticate", `Bearer realm="floodgate-admin"`)
}

// guardHost refuses requests whose Host is a name that is not allowed,
// with 421 Misdirected Request: a page on a name its attacker controls
// can point that name at 127.0.0.1 (DNS rebinding) and read the answers
// as same-origin, which Host alone gives away. IP literals need no check
// (no rebinding without a name), nor an HTTP/1.0 request without Host;
// "localhost", the listen host and
// listeners.allowed_hosts are the names allowed.
func (s *Server) guardHost(listen string, next http.Handler) http.Handler {
	own, _, _ := net.SplitHostPort(listen)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r.Host, own, s.state.Load().cfg.Listeners.AllowedHosts) {
			writeProblem(w, http.StatusMisdirectedRequest, "Misdirected Request", "this listener does not answer for that Host; add it to listeners.allowed_hosts")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func hostAllowed(hostport, own string, allowed []string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if _, err := netip.ParseAddr(host); err == nil || host == "" || host == "localhost" || (own != "" && strings.EqualFold(host, own)) {
		return true
	}
	return slices.ContainsFunc(allowed, func(a string) bool {
		a = strings.ToLower(a)
		if suffix, ok := strings.CutPrefix(a, "*"); ok {
			return a == "*" || strings.HasSuffix(host, suffix)
		}
		return host == a
	})
}
