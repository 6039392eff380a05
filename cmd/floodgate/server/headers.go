package server

import (
	"net/http"
	"strconv"

	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
)

// setHeaders writes the rate-limit fields of a decision-API answer, the
// same fields the middleware puts on proxied responses (H3, H4, H6), and
// Retry-After when refused (H2).
func (st *state) setHeaders(h http.Header, o *engine.Outcome) {
	if o.Summary < 0 {
		return
	}
	if o.Verdict != engine.Allowed {
		h[header.FieldRetryAfter] = []string{strconv.FormatInt(engine.RetryAfterSeconds(o), 10)}
	}
	st.fields.Set(h, o)
}
