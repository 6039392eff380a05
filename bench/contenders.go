package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
)

// Floodgate returns next behind the middleware as the middleware
// benchmarks (BenchmarkMiddleware, cmd/mwserve) configure it: one GCRA
// rule for every path, keyed by client IP, quota per minute, on store,
// sending the fields of style.
func Floodgate(store floodgate.Store, style engine.HeaderStyle, quota int64, next http.Handler) (http.Handler, error) {
	mw, err := httplimit.New(httplimit.Config{Store: store, Headers: style, Rules: []httplimit.Rule{{
		Pattern:  "/",
		Policies: []floodgate.Policy{{Name: "api", Algorithm: floodgate.GCRA, Quota: quota, Window: time.Minute}},
	}}})
	if err != nil {
		return nil, err
	}
	return mw.Wrap(next), nil
}

// FieldsOnly returns next setting, as constants, the five rate-limit fields
// that limited (a middleware of the default style) sent on one sample
// response: no middleware, no formatting, no allocation. What it adds to
// next is what net/http, or the recorder, and the client charge for the
// fields themselves, the floor under any middleware that sends them.
func FieldsOnly(limited, next http.Handler) (http.Handler, error) {
	sample := httptest.NewRecorder()
	limited.ServeHTTP(sample, httptest.NewRequest("GET", "/", nil))
	type field struct {
		name  string
		value []string
	}
	var fields []field
	for name, v := range sample.Header() {
		if strings.HasPrefix(name, "Ratelimit") || strings.HasPrefix(name, "X-Ratelimit") {
			fields = append(fields, field{name, v[:len(v):len(v)]})
		}
	}
	if len(fields) != 5 {
		return nil, fmt.Errorf("a default response carries %d rate-limit fields, want 5: %v", len(fields), sample.Header())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for _, f := range fields {
			h[f.name] = f.value
		}
		next.ServeHTTP(w, r)
	}), nil
}
