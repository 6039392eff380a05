// Package tiertest holds what the tests of API-key tiers share (packages
// tier and tierhttp): a SaaS API behind an IP guard and a tier plan,
// helpers to call it and read its refusals, a settable clock and a log
// handler that keeps messages.
package tiertest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
)

// PerMinute is a sliding-window-counter policy of quota per minute.
func PerMinute(name string, quota int64) floodgate.Policy {
	return floodgate.Policy{Name: name, Algorithm: floodgate.SlidingWindowCounter, Quota: quota, Window: time.Minute}
}

// API builds the middleware of a SaaS API: an IP guard of guard requests
// per minute, then the tier of the request's API key.
func API(t testing.TB, plan func(*http.Request) (engine.Plan, error), guard int64, mode floodgate.FailureMode) http.Handler {
	t.Helper()
	store := testkit.Memory(t)
	mw, err := httplimit.New(httplimit.Config{Store: store, Logger: slog.New(slog.DiscardHandler), Rules: []httplimit.Rule{{
		Pattern: "/api/",
		Rule: engine.Rule{
			Policies:    []floodgate.Policy{PerMinute("ip-guard", guard)},
			FailureMode: mode,
		},
		Plan: plan,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
}

// Call sends GET /api/items with the given header pairs from one client.
func Call(h http.Handler, kv ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/api/items", nil)
	r.RemoteAddr = "192.0.2.7:40000"
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Set(kv[i], kv[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// Codes sends n requests with key and returns the status counts.
func Codes(h http.Handler, key string, n int) map[int]int {
	out := map[int]int{}
	for range n {
		out[Call(h, "X-API-Key", key).Code]++
	}
	return out
}

// ProblemOf decodes a problem+json response, failing on any other type.
func ProblemOf(t testing.TB, rec *httptest.ResponseRecorder) header.Problem {
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

// Want401 checks a 401 problem whose type ends in code.
func Want401(t testing.TB, rec *httptest.ResponseRecorder, code string) {
	t.Helper()
	if rec.Code != 401 {
		t.Fatalf("status %d, want 401 %s (body %q)", rec.Code, code, rec.Body)
	}
	p := ProblemOf(t, rec)
	if !strings.HasSuffix(p.Type, ":"+code) || p.Status != 401 || p.Title == "" || p.Detail == "" {
		t.Fatalf("problem %+v, want type …:%s, status 401, a title and a detail", p, code)
	}
}

// Clock is a settable time for cache expiry, so tests need not wait a TTL.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock reading 1 January 2025, 00:00 UTC.
func NewClock() *Clock { return &Clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Logs is an slog.Handler keeping each record's message.
type Logs struct {
	mu   sync.Mutex
	msgs []string
}

func (l *Logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *Logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	return nil
}
func (l *Logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *Logs) WithGroup(string) slog.Handler      { return l }

// Count returns how many messages contain s.
func (l *Logs) Count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}
