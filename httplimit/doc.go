// Package httplimit is Floodgate's net/http middleware. Rules matched by
// method, host and path give each request its policies, a partition key and
// a cost; a denied request gets 429 with Retry-After and an RFC 9457
// problem body, and every response of a limited route carries the
// rate-limit fields: RateLimit and RateLimit-Policy
// (draft-ietf-httpapi-ratelimit-headers-11) and X-RateLimit-*.
//
//	mw, err := httplimit.New(httplimit.Config{Store: store, Rules: []httplimit.Rule{{
//		Pattern: "POST /login",
//		Key:     []httplimit.KeyPart{httplimit.ClientIP(), httplimit.Route()},
//		Rule: engine.Rule{
//			Policies: []floodgate.Policy{{Name: "login", Algorithm: floodgate.GCRA, Quota: 5, Window: time.Minute}},
//		},
//	}}})
//	if err != nil { ... }
//	handler := mw.Wrap(mux)
//
// # Patterns
//
// Rule.Pattern and Config.Skip take the syntax of http.ServeMux (Go 1.22):
// "[METHOD ][HOST]/[PATH]", where a path segment is a literal, a {name}
// wildcard (one segment), a final {name...} (the rest) or a final {$} (the
// path ends there), and a path ending in "/" matches everything below it.
// Literals are percent-decoded as ServeMux decodes them ("/my%20file"), and
// GET also matches HEAD.
//
// Rules are tried in order and the first match wins: there is no
// precedence by specificity, so list narrow rules before broad ones. So
// that a limit is not dodged by respelling a path, matching is looser than
// ServeMux's: the path is cleaned ("//login", "/a/../login"), literals and
// methods compare without regard to case, ";parameters" are dropped from
// segments, and an exact pattern such as "/login" also matches "/login/".
// For a rule this errs towards limiting more; for a skip, towards skipping
// more ("GET /healthz" also skips "/HEALTHZ/"), so keep skip patterns
// narrow.
//
// docs/MIDDLEWARE.md describes every option and the exact fields a client
// sees on a 200 and on a 429.
package httplimit
