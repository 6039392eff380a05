package server

import (
	"net/http"
	"strconv"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
)

// setHeaders writes the rate-limit fields of a decision-API answer, the
// same fields the middleware puts on proxied responses (H3, H4, H6), and
// Retry-After when denied (H2).
func (st *state) setHeaders(h http.Header, ls *limiterSet, d floodgate.Decision) {
	if len(d.Results) == 0 {
		return
	}
	var denied *floodgate.Decision
	if !d.Allowed {
		denied = &d
		h[header.FieldRetryAfter] = []string{strconv.FormatInt(httplimit.RetryAfterSeconds(denied), 10)}
	}
	st.headers.Set(h, ls.policyField, d.Results, denied)
}
