package httplimit

import "net/http"

// RuleFor names the rule that decides r, as the middleware matches it
// (skip patterns first, then the rules in order), or "" when r passes
// unlimited by a skip pattern or no rule; bypasses are not consulted. It
// labels requests per rule outside the middleware: metrics and access
// logs of the requests it let through.
func (m *Middleware) RuleFor(r *http.Request) string {
	if ru := m.find(r); ru != nil {
		return ru.name
	}
	return ""
}
