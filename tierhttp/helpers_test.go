package tierhttp_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/memorystore"
)

func perMinute(name string, quota int64) floodgate.Policy {
	return floodgate.Policy{Name: name, Algorithm: floodgate.SlidingWindowCounter, Quota: quota, Window: time.Minute}
}

// api builds the middleware of a SaaS API: an IP guard of guard requests
// per minute, then the tier of the request's API key.
func api(t testing.TB, plan func(*http.Request) (engine.Plan, error), guard int64, mode floodgate.FailureMode) http.Handler {
	t.Helper()
	store := memorystore.New()
	t.Cleanup(func() { store.Close() })
	mw, err := httplimit.New(httplimit.Config{Store: store, Logger: slog.New(slog.DiscardHandler), Rules: []httplimit.Rule{{
		Pattern:     "/api/",
		Policies:    []floodgate.Policy{perMinute("ip-guard", guard)},
		Plan:        plan,
		FailureMode: mode,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
}

// call sends GET /api/items with the given header pairs from one client.
func call(h http.Handler, kv ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/api/items", nil)
	r.RemoteAddr = "192.0.2.7:40000"
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Set(kv[i], kv[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// codes sends n requests with key and returns the status counts.
func codes(h http.Handler, key string, n int) map[int]int {
	out := map[int]int{}
	for range n {
		out[call(h, "X-API-Key", key).Code]++
	}
	return out
}

// problemOf decodes a problem+json response, failing on any other type.
func problemOf(t *testing.T, rec *httptest.ResponseRecorder) header.Problem {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != header.ProblemContentType {
		t.Fatalf("Content-Type %q, want %q (body %q)", ct, header.ProblemContentType, rec.Body)
	}
	var p header.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", rec.Body, err)
	}
	return p
}

// want401 checks a 401 problem whose type ends in code.
func want401(t *testing.T, rec *httptest.ResponseRecorder, code string) {
	t.Helper()
	if rec.Code != 401 {
		t.Fatalf("status %d, want 401 %s (body %q)", rec.Code, code, rec.Body)
	}
	p := problemOf(t, rec)
	if !strings.HasSuffix(p.Type, ":"+code) || p.Status != 401 || p.Title == "" || p.Detail == "" {
		t.Fatalf("problem %+v, want type …:%s, status 401, a title and a detail", p, code)
	}
}
