package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	tollbooth "github.com/didip/tollbooth/v7"
	tblimiter "github.com/didip/tollbooth/v7/limiter"
	svhttplimit "github.com/sethvargo/go-limiter/httplimit"
	svmemory "github.com/sethvargo/go-limiter/memorystore"

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
		Pattern: "/",
		Rule: engine.Rule{
			Policies: []floodgate.Policy{{Name: "api", Algorithm: floodgate.GCRA, Quota: quota, Window: time.Minute}},
		},
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

// Sethvargo returns next behind sethvargo/go-limiter's httplimit
// middleware as the middleware benchmarks configure it: its memory store
// with a limit no benchmark reaches, a thousand per millisecond (a million
// a second), keyed by the client IP of RemoteAddr. It sends the three
// X-RateLimit-* fields, as ulule's middleware does. Not the others' quota
// per minute: its store refills interval/Tokens tokens (the interval in
// ns) per elapsed interval, so a bucket of more than √interval tokens never
// refills whole — a hundred million a minute, or 1.67 million a second,
// answered 429 within a minute of wrk — while 1,000 per ms refill whole.
func Sethvargo(next http.Handler) (http.Handler, error) {
	store, err := svmemory.New(&svmemory.Config{Tokens: 1000, Interval: time.Millisecond})
	if err != nil {
		return nil, err
	}
	mw, err := svhttplimit.NewMiddleware(store, svhttplimit.IPKeyFunc())
	if err != nil {
		return nil, err
	}
	return mw.Handle(next), nil
}

// Tollbooth returns next behind didip/tollbooth's LimitHandler: a token
// bucket of quota per minute (tollbooth counts per second, burst the same),
// keyed by the client IP of RemoteAddr only. It sends six fields:
// X-Rate-Limit-Limit, -Duration and -Request-Remote-Addr, and
// RateLimit-Limit, -Reset and -Remaining.
func Tollbooth(quota float64, next http.Handler) http.Handler {
	lmt := tollbooth.NewLimiter(quota/60, &tblimiter.ExpirableOptions{DefaultExpirationTTL: time.Hour})
	lmt.SetIPLookups([]string{"RemoteAddr"})
	return tollbooth.LimitHandler(lmt, next)
}
