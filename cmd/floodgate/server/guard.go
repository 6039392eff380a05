package server

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/floodgate/floodgate/httplimit"
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
	case a.Token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(a.Token)) == 1:
		return adminFull
	case a.ReadToken != "" && subtle.ConstantTimeCompare([]byte(got), []byte(a.ReadToken)) == 1:
		return adminRead
	}
	return adminNone
}

// guardAdmin puts an admin endpoint behind admin.token when one is set;
// readOnly endpoints also take admin.read_token. Without a token they are
// open, as the admin listener is on loopback by default; endpoints that
// change something refuse by themselves then (authorized).
func (s *Server) guardAdmin(readOnly bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := s.state.Load()
		if st.cfg.Admin.Token == "" {
			next.ServeHTTP(w, r)
			return
		}
		switch lvl := s.adminLevel(r, st); {
		case lvl == adminFull, lvl == adminRead && readOnly && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			next.ServeHTTP(w, r)
		case lvl == adminRead:
			writeProblem(w, http.StatusForbidden, "Forbidden", "admin.read_token opens the read-only endpoints only; this one needs admin.token")
		default:
			// Basic lets a browser ask for the token on the dashboard.
			w.Header().Set("WWW-Authenticate", `Bearer realm="floodgate-admin", Basic realm="floodgate-admin"`)
			writeProblem(w, http.StatusUnauthorized, "Unauthorized", "send the admin token as Authorization: Bearer <token>")
		}
	})
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
