package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/httplimit"
)

// callerKey holds the authenticated *config.Caller in a request context.
type callerKey struct{}

// guardAPI lets a request reach an API handler only from a caller holding
// scope, when api.callers are configured: 401 without a known secret, 403
// without the scope, or (peek and reset) for a rule or key the caller may
// not use. Without callers the API listens on loopback only (apiListen)
// and every local process may use it. A reset also passes with the admin
// token, as before callers existed.
func (s *Server) guardAPI(scope string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st := s.state.Load()
		if st.cfg.API == nil {
			// A reload removed the face; its listener stays until a restart.
			writeProblem(w, http.StatusNotFound, "Not Found", "the decision API is not configured")
			return
		}
		cs := st.cfg.API.Callers
		if len(cs) == 0 {
			// No callers: loopback only. The listener was bound so at
			// start, but a reload that removed every caller leaves a
			// listener bound for callers, so each request is checked too.
			if !fromLoopback(r) {
				writeProblem(w, http.StatusForbidden, "Forbidden", "no api.callers are configured: the decision API answers loopback clients only")
				return
			}
			next(w, r)
			return
		}
		c := authenticate(cs, r)
		if c == nil && scope == config.ScopeReset && s.adminLevel(r, st) == adminFull {
			next(w, r)
			return
		}
		if c == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="floodgate-api"`)
			writeProblem(w, http.StatusUnauthorized, "Unauthorized", "send a caller's secret as Authorization: Bearer <secret> (api.callers)")
			return
		}
		if !slices.Contains(c.Scopes, scope) {
			writeProblem(w, http.StatusForbidden, "Forbidden", fmt.Sprintf("caller %q lacks the %s scope", c.Name, scope))
			return
		}
		if scope != config.ScopeCheck {
			q := r.URL.Query()
			var policies []string
			if p := q.Get("policies"); p != "" {
				policies = strings.Split(p, ",")
			}
			// The prefixes bound the key counted, which the identity form
			// of /v1/limits rewrites (limitKey): check that one.
			key, cerr := limitKey(st, r)
			if cerr == nil {
				cerr = permitted(c, q.Get("rule"), policies, key)
			}
			if cerr != nil {
				writeProblem(w, cerr.status, http.StatusText(cerr.status), cerr.detail)
				return
			}
		}
		next(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	}
}

// authenticate returns the caller whose secret the request's bearer token
// is, or nil. Every caller's hash is compared, in constant time, so the
// time taken tells nothing of which one came close.
func authenticate(cs []config.Caller, r *http.Request) *config.Caller {
	tok, ok := httplimit.BearerToken(r)
	if !ok {
		return nil
	}
	sum := sha256.Sum256([]byte(tok))
	var found *config.Caller
	for i := range cs {
		h := cs[i].Hash()
		if subtle.ConstantTimeCompare(sum[:], h[:]) == 1 {
			found = &cs[i]
		}
	}
	return found
}

// permit refuses a check of a rule, policies or key that the request's
// caller may not use (nil: no callers configured, or permitted).
func permit(ctx context.Context, req *CheckRequest) *checkError {
	c, _ := ctx.Value(callerKey{}).(*config.Caller)
	if c == nil {
		return nil
	}
	return permitted(c, req.Rule, req.Policies, req.Key)
}

func permitted(c *config.Caller, rule string, policies []string, key string) *checkError {
	forbid := func(format string, args ...any) *checkError {
		return &checkError{status: http.StatusForbidden, detail: fmt.Sprintf("caller %q ", c.Name) + fmt.Sprintf(format, args...)}
	}
	if len(c.KeyPrefixes) > 0 && !slices.ContainsFunc(c.KeyPrefixes, func(p string) bool { return strings.HasPrefix(key, p) }) {
		return forbid("may use only keys starting with %s", strings.Join(c.KeyPrefixes, ", "))
	}
	if slices.Contains(c.Rules, "*") {
		return nil
	}
	switch {
	case len(policies) > 0 || rule == "":
		return forbid("must name one of its rules (%s)", strings.Join(c.Rules, ", "))
	case !slices.Contains(c.Rules, rule):
		return forbid("may not use rule %q (its rules: %s)", rule, strings.Join(c.Rules, ", "))
	}
	return nil
}

// apiListen is the address the API listens on: with no callers
// configured, only loopback may reach it, whatever api.listen says.
// moved reports a change.
func apiListen(cfg *config.Config) (addr string, moved bool) {
	addr = cfg.API.Listen
	if len(cfg.API.Callers) > 0 {
		return addr, false
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil || config.Loopback(addr) {
		return addr, false
	}
	return net.JoinHostPort("127.0.0.1", port), true
}

// fromLoopback reports whether r's socket peer is a loopback address.
func fromLoopback(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}
