package httplimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clientip"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/storetest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func policy(name string, a floodgate.Algorithm, quota int64, window time.Duration) floodgate.Policy {
	return floodgate.Policy{Name: name, Algorithm: a, Quota: quota, Window: window}
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// serve starts a real HTTP server on loopback behind the middleware.
func serve(t *testing.T, cfg httplimit.Config, h http.Handler) *httptest.Server {
	t.Helper()
	if cfg.Store == nil && cfg.Engine == nil {
		st := testkit.Memory(t)
		cfg.Store = st
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	mw, err := httplimit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mw.Wrap(h))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // panics are part of some tests
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// newEngine is an engine on cfg, its Store a memory store when it has
// none, logging nowhere.
func newEngine(t *testing.T, cfg engine.Config) *engine.Engine {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = testkit.Memory(t)
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func do(t *testing.T, method, url string, hdr ...string) *http.Response {
	t.Helper()
	resp, _ := testkit.Do(t, method, url, "", hdr...)
	return resp
}

// TestLoginV3 is seed case V3: 5 logins pass, the 6th gets 429 with
// Retry-After and a body naming the rate limit.
func TestLoginV3(t *testing.T) {
	srv := serve(t, httplimit.Config{Rules: []httplimit.Rule{{
		Pattern: "POST /login",
		Rule: engine.Rule{
			Policies: []floodgate.Policy{policy("login", floodgate.SlidingWindowCounter, 5, time.Minute)},
		},
		Key: []httplimit.KeyPart{httplimit.ClientIP(), httplimit.Route()},
	}}}, ok)
	for i := range 5 {
		resp := do(t, "POST", srv.URL+"/login")
		if resp.StatusCode != 200 {
			t.Fatalf("login %d: status %d", i+1, resp.StatusCode)
		}
		if got := resp.Header.Get("X-RateLimit-Remaining"); got != strconv.Itoa(4-i) {
			t.Fatalf("login %d: X-RateLimit-Remaining %q, want %d", i+1, got, 4-i)
		}
	}
	resp, err := http.Post(srv.URL+"/login", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("6th login: status %d, want 429", resp.StatusCode)
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	// The counter estimate decays through the next window: at most 12 s
	// into it (5·(60−e)/60 + 1 ≤ 5 at e = 12 s), so at most 72 s away.
	if err != nil || ra < 12 || ra > 72 {
		t.Fatalf("Retry-After %q, want 12..72 seconds", resp.Header.Get("Retry-After"))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var p header.Problem
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.Type != header.ProblemQuotaExceeded || p.Status != 429 || p.Detail != "rate limit of 5 requests per 1m exceeded" ||
		len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "login" || p.RetryAfter != int64(ra) {
		t.Fatalf("problem %+v", p)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatal("a 429 must say Cache-Control: no-store")
	}
	// Other routes are not affected by the login limit.
	if resp := do(t, "GET", srv.URL+"/other"); resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "" {
		t.Fatalf("unmatched route: %d %q", resp.StatusCode, resp.Header.Get("RateLimit"))
	}
}

// TestHeadersOn200 checks every field on a success and that each value
// re-parses with the strict draft-11 parser to what was meant (H3, H4).
func TestHeadersOn200(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch.Add(15 * time.Second))
	st := testkit.Memory(t, memorystore.WithClock(clock.Now))
	srv := serve(t, httplimit.Config{Store: st, Now: clock.Now, Rules: []httplimit.Rule{{
		Pattern: "/api/",
		Rule: engine.Rule{
			Policies: []floodgate.Policy{
				{Name: "burst", Algorithm: floodgate.TokenBucket, Quota: 5, Window: time.Second},
				policy("minute", floodgate.FixedWindow, 100, time.Minute),
			},
		},
		Key: []httplimit.KeyPart{httplimit.APIKey("X-API-Key")},
	}}}, ok)
	resp := do(t, "GET", srv.URL+"/api/items", "X-API-Key", "secret-1")
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	pols, err := header.ParsePolicy(resp.Header.Values("RateLimit-Policy")...)
	if err != nil {
		t.Fatal(err)
	}
	if len(pols) != 2 || pols[0].Name != "burst" || pols[0].Quota != 5 || pols[0].Window != 1 ||
		pols[1].Name != "minute" || pols[1].Quota != 100 || pols[1].Window != 60 {
		t.Fatalf("RateLimit-Policy %q parsed to %+v", resp.Header.Get("RateLimit-Policy"), pols)
	}
	lims, err := header.ParseLimit(resp.Header.Values("RateLimit")...)
	if err != nil {
		t.Fatal(err)
	}
	// burst: 4 tokens left, which last 0.8 s at q/w = 5/s; t is at least
	// whole second, so t = 1 and r = 4. minute: 99 left
	// would last 59.4 s at 100/60, but the window ends in 45 s: t = 45,
	// and r is cut to the 75 that 100/60 allows in 45 s (draft-11 §8).
	if len(lims) != 2 || lims[0].Name != "burst" || lims[0].Remaining != 4 || lims[0].Window != 1 || !lims[0].HasWindow ||
		lims[1].Name != "minute" || lims[1].Remaining != 75 || lims[1].Window != 45 {
		t.Fatalf("RateLimit %q parsed to %+v", resp.Header.Get("RateLimit"), lims)
	}
	// Legacy fields describe the policy closest to its limit: burst (4/5).
	reset := clock.Now().Add(200 * time.Millisecond)
	wantReset := strconv.FormatInt(reset.Unix()+1, 10) // rounded up
	if resp.Header.Get("X-RateLimit-Limit") != "5" || resp.Header.Get("X-RateLimit-Remaining") != "4" || resp.Header.Get("X-RateLimit-Reset") != wantReset {
		t.Fatalf("legacy fields %q %q %q, want 5 4 %s", resp.Header.Get("X-RateLimit-Limit"), resp.Header.Get("X-RateLimit-Remaining"), resp.Header.Get("X-RateLimit-Reset"), wantReset)
	}
	// Above 90% used: the warning (H6).
	for range 4 {
		resp = do(t, "GET", srv.URL+"/api/items", "X-API-Key", "secret-1")
	}
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("X-RateLimit-Warning"), `"burst": 5 of 5 used`) {
		t.Fatalf("5th request: %d warning %q", resp.StatusCode, resp.Header.Get("X-RateLimit-Warning"))
	}
	// The sixth is denied by burst alone; minute spent nothing for it: 95
	// left, of which 100/60 allows 75 within the 45 s to the window's end.
	resp = do(t, "GET", srv.URL+"/api/items", "X-API-Key", "secret-1")
	lims, _ = header.ParseLimit(resp.Header.Values("RateLimit")...)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" || len(lims) != 2 || lims[0].Remaining != 0 || lims[1].Remaining != 75 {
		t.Fatalf("6th: %d Retry-After %q RateLimit %q", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("RateLimit"))
	}
	// A different API key has its own partition.
	if resp := do(t, "GET", srv.URL+"/api/items", "X-API-Key", "secret-2"); resp.StatusCode != 200 {
		t.Fatalf("other key: %d", resp.StatusCode)
	}
}

func TestHeaderStyles(t *testing.T) {
	for _, tc := range []struct {
		style            engine.HeaderStyle
		draft11, legacy  bool
		resetStyle       header.ResetStyle
		wantResetIsDelta bool
	}{
		{engine.Both, true, true, header.ResetEpoch, false},
		{engine.Draft11, true, false, 0, false},
		{engine.Legacy, false, true, header.ResetDelta, true},
		{engine.None, false, false, 0, false},
	} {
		t.Run(tc.style.String(), func(t *testing.T) {
			srv := serve(t, httplimit.Config{Headers: tc.style, ResetStyle: tc.resetStyle, Rules: []httplimit.Rule{{
				Pattern: "/", Rule: engine.Rule{Policies: []floodgate.Policy{policy("p", floodgate.FixedWindow, 10, time.Hour)}},
			}}}, ok)
			resp := do(t, "GET", srv.URL+"/")
			if (resp.Header.Get("RateLimit") != "") != tc.draft11 || (resp.Header.Get("RateLimit-Policy") != "") != tc.draft11 {
				t.Fatalf("draft-11 fields present = %v, want %v", resp.Header.Get("RateLimit") != "", tc.draft11)
			}
			if (resp.Header.Get("X-RateLimit-Limit") != "") != tc.legacy {
				t.Fatalf("legacy fields present = %v, want %v", !tc.legacy, tc.legacy)
			}
			if tc.wantResetIsDelta {
				if n, _ := strconv.Atoi(resp.Header.Get("X-RateLimit-Reset")); n < 1 || n > 3600 {
					t.Fatalf("delta reset %q", resp.Header.Get("X-RateLimit-Reset"))
				}
			}
		})
	}
}

// TestRouteSeparation: a busy export route does not block payments (K4).
func TestRouteSeparation(t *testing.T) {
	srv := serve(t, httplimit.Config{Rules: []httplimit.Rule{
		{Pattern: "/export", Rule: engine.Rule{Policies: []floodgate.Policy{policy("export", floodgate.FixedWindow, 2, time.Minute)}}},
		{Pattern: "/payments", Rule: engine.Rule{Policies: []floodgate.Policy{policy("payments", floodgate.FixedWindow, 2, time.Minute)}}},
	}}, ok)
	for range 5 {
		do(t, "GET", srv.URL+"/export")
	}
	if resp := do(t, "GET", srv.URL+"/export"); resp.StatusCode != 429 {
		t.Fatalf("export: %d", resp.StatusCode)
	}
	if resp := do(t, "GET", srv.URL+"/payments"); resp.StatusCode != 200 {
		t.Fatalf("payments blocked by export traffic: %d", resp.StatusCode)
	}
}

func TestSkipAndBypass(t *testing.T) {
	rec := &recorder{}
	srv := serve(t, httplimit.Config{
		Engine: newEngine(t, engine.Config{Observer: rec}),
		Skip:   []string{"GET /healthz"},
		Bypass: httplimit.Bypass{Tokens: []string{"monitoring-token"}, CIDRs: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}},
		Rules:  []httplimit.Rule{{Pattern: "/", Rule: engine.Rule{Policies: []floodgate.Policy{policy("all", floodgate.FixedWindow, 1, time.Hour)}}}},
	}, ok)
	do(t, "GET", srv.URL+"/")
	if resp := do(t, "GET", srv.URL+"/"); resp.StatusCode != 429 {
		t.Fatalf("second request: %d", resp.StatusCode)
	}
	for range 3 {
		if resp := do(t, "GET", srv.URL+"/healthz"); resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("skipped path: %d", resp.StatusCode)
		}
		if resp := do(t, "GET", srv.URL+"/", "X-Bypass-Token", "monitoring-token"); resp.StatusCode != 200 {
			t.Fatalf("bypass token: %d", resp.StatusCode)
		}
		if resp := do(t, "GET", srv.URL+"/", "X-Bypass-Token", "monitoring-tokeN"); resp.StatusCode != 429 {
			t.Fatalf("wrong token: %d", resp.StatusCode)
		}
	}
	if got := rec.count(func(e engine.Event) bool { return e.Verdict == engine.Bypassed }); got != 3 {
		t.Fatalf("bypasses reported %d, want 3", got)
	}
}

// TestCIDRBypassAndSpoofing: X-Forwarded-For from an untrusted peer changes
// nothing; from a trusted proxy it names the client (K2, K5).
func TestCIDRBypassAndSpoofing(t *testing.T) {
	untrusted, _ := clientip.New(clientip.Config{})
	trusted, _ := clientip.New(clientip.Config{TrustedProxies: []string{"127.0.0.0/8", "::1/128"}})
	rule := httplimit.Rule{Pattern: "/", Rule: engine.Rule{Policies: []floodgate.Policy{policy("ip", floodgate.FixedWindow, 1, time.Hour)}}}
	// Written IPv4-mapped, as it may come from a config: it must still
	// match 198.51.100.7.
	bypass := httplimit.Bypass{CIDRs: []netip.Prefix{netip.MustParsePrefix("::ffff:198.51.100.0/120")}}

	t.Run("untrusted peer", func(t *testing.T) {
		srv := serve(t, httplimit.Config{ClientIP: untrusted, Bypass: bypass, Rules: []httplimit.Rule{rule}}, ok)
		do(t, "GET", srv.URL+"/", "X-Forwarded-For", "203.0.113.1")
		// A new spoofed address does not make a new partition, nor does an allow-listed one bypass.
		for _, xff := range []string{"203.0.113.2", "198.51.100.7"} {
			if resp := do(t, "GET", srv.URL+"/", "X-Forwarded-For", xff); resp.StatusCode != 429 {
				t.Fatalf("spoofed X-Forwarded-For %s got %d, want 429", xff, resp.StatusCode)
			}
		}
	})
	t.Run("trusted proxy", func(t *testing.T) {
		srv := serve(t, httplimit.Config{ClientIP: trusted, Bypass: bypass, Rules: []httplimit.Rule{rule}}, ok)
		do(t, "GET", srv.URL+"/", "X-Forwarded-For", "203.0.113.1")
		if resp := do(t, "GET", srv.URL+"/", "X-Forwarded-For", "203.0.113.1"); resp.StatusCode != 429 {
			t.Fatalf("same client again: %d", resp.StatusCode)
		}
		if resp := do(t, "GET", srv.URL+"/", "X-Forwarded-For", "203.0.113.2"); resp.StatusCode != 200 {
			t.Fatalf("another client behind the proxy: %d", resp.StatusCode)
		}
		for range 3 {
			if resp := do(t, "GET", srv.URL+"/", "X-Forwarded-For", "198.51.100.7"); resp.StatusCode != 200 {
				t.Fatalf("allow-listed client: %d", resp.StatusCode)
			}
		}
	})
}

func TestShadowNeverBlocks(t *testing.T) {
	rec := &recorder{}
	srv := serve(t, httplimit.Config{Engine: newEngine(t, engine.Config{Observer: rec}), Rules: []httplimit.Rule{{
		Pattern: "/", Rule: engine.Rule{Mode: engine.Shadow, Policies: []floodgate.Policy{policy("trial", floodgate.FixedWindow, 2, time.Hour)}},
	}}}, ok)
	for i := range 6 {
		resp := do(t, "GET", srv.URL+"/")
		if resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, resp.Header.Get("RateLimit"))
		}
	}
	if got := rec.count(func(e engine.Event) bool { return e.Shadow }); got != 4 {
		t.Fatalf("shadow denials reported %d, want 4", got)
	}
}

func TestThrottle(t *testing.T) {
	rec := &recorder{}
	srv := serve(t, httplimit.Config{Engine: newEngine(t, engine.Config{Observer: rec}), Rules: []httplimit.Rule{
		{Pattern: "/short",
			Rule: engine.Rule{
				Mode:     engine.Throttle,
				MaxDelay: time.Second,
				Policies: []floodgate.Policy{{Name: "pace", Algorithm: floodgate.GCRA, Quota: 10, Window: time.Second, Burst: 1}},
			}},
		{Pattern: "/long",
			Rule: engine.Rule{
				Mode:     engine.Throttle,
				MaxDelay: 50 * time.Millisecond,
				Policies: []floodgate.Policy{policy("hourly", floodgate.FixedWindow, 1, time.Hour)},
			}},
	}}, ok)
	// 1 at once, then one per 100 ms: the 2nd and 3rd are held, not refused.
	start := time.Now()
	for i := range 3 {
		if resp := do(t, "GET", srv.URL+"/short"); resp.StatusCode != 200 {
			t.Fatalf("throttled request %d: %d", i, resp.StatusCode)
		}
	}
	if el := time.Since(start); el < 190*time.Millisecond {
		t.Fatalf("3 requests at 10/s with burst 1 took %v; they were not held", el)
	}
	// Retry-After of an hour is beyond the 50 ms MaxDelay: refused at once,
	// without a wait.
	do(t, "GET", srv.URL+"/long")
	if resp := do(t, "GET", srv.URL+"/long"); resp.StatusCode != 429 {
		t.Fatalf("beyond max delay: %d", resp.StatusCode)
	}
	rec.mu.Lock()
	last := rec.events[len(rec.events)-1]
	rec.mu.Unlock()
	if last.Verdict != engine.Denied || last.Waits != 0 {
		t.Fatalf("a request that cannot fit: %+v, want a denial after no wait", last)
	}
	// A client that goes away stops the wait: the bucket is empty again, so
	// this request would be held about 100 ms, but its client leaves at 30.
	do(t, "GET", srv.URL+"/short")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/short", nil)
	rec.mu.Lock()
	before := len(rec.events)
	rec.mu.Unlock()
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("a request whose client left got %d", resp.StatusCode)
	}
	// Had the server gone on holding it, it would have admitted it once the
	// pace allowed (~100 ms); it must have given up at once instead, as a
	// refusal.
	time.Sleep(250 * time.Millisecond)
	rec.mu.Lock()
	events := rec.events[before:]
	rec.mu.Unlock()
	if len(events) != 1 || events[0].Verdict != engine.Denied {
		t.Fatalf("the abandoned request's decisions: %+v, want one refusal", events)
	}

	// A deadline of the server's own (here 30 ms, set outside the
	// middleware) ends the wait too, and its client is told so: a 429.
	st := testkit.Memory(t)
	mw, err := httplimit.New(httplimit.Config{Store: st, Logger: quiet, Rules: []httplimit.Rule{
		{Pattern: "/",
			Rule: engine.Rule{
				Mode:     engine.Throttle,
				MaxDelay: 10 * time.Second,
				Policies: []floodgate.Policy{{Name: "pace", Algorithm: floodgate.GCRA, Quota: 1, Window: 5 * time.Second, Burst: 1}},
			}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	limited := mw.Wrap(ok)
	deadlined := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Millisecond)
		defer cancel()
		limited.ServeHTTP(w, r.WithContext(ctx))
	}))
	defer deadlined.Close()
	do(t, "GET", deadlined.URL)
	start = time.Now()
	resp := do(t, "GET", deadlined.URL) // would fit after 5 s
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "5" {
		t.Fatalf("server deadline during the wait: %d, Retry-After %q; want 429, 5", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if el := time.Since(start); el > 2500*time.Millisecond { // tells 30 ms from 5 s on a loaded machine
		t.Fatalf("the server's deadline of 30 ms ended the wait after %v", el)
	}
}

// TestContextEndedBeforeDecision: a request whose context has already
// ended is neither admitted nor left without an answer: 503, and the
// handler does not run, whether the decision was a rate policy's, a
// slot's or a plan's (whose source fails only because of the context),
// and even where store failures fail open.
func TestContextEndedBeforeDecision(t *testing.T) {
	st := testkit.Memory(t)
	mw, err := httplimit.New(httplimit.Config{Store: st, Logger: quiet, Rules: []httplimit.Rule{
		{Pattern: "/rate", Rule: engine.Rule{FailureMode: floodgate.FailOpen, Policies: []floodgate.Policy{policy("p", floodgate.GCRA, 10, time.Second)}}},
		{Pattern: "/slot", Rule: engine.Rule{FailureMode: floodgate.FailOpen, Concurrency: []floodgate.Concurrency{{Name: "inflight", Max: 1}}}},
		{Pattern: "/plan",
			Rule: engine.Rule{
				FailureMode: floodgate.FailOpen,
			},
			Plan: func(r *http.Request) (engine.Plan, error) {
				return engine.Plan{}, r.Context().Err()
			}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran = true }))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, path := range []string{"/rate", "/slot", "/plan"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil).WithContext(ctx))
		if rec.Code != 503 || ran || rec.Header().Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(rec.Body.String(), "context ended before its rate limit was decided: context canceled") {
			t.Fatalf("%s, ended context: %d, handler ran %v, %s %s", path, rec.Code, ran, rec.Header().Get("Content-Type"), rec.Body)
		}
	}
}

func TestConcurrencySlots(t *testing.T) {
	release := make(chan struct{})
	var entered sync.WaitGroup
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("handler failed")
		}
		entered.Done()
		<-release
		io.WriteString(w, "done")
	})
	srv := serve(t, httplimit.Config{Rules: []httplimit.Rule{{
		Pattern: "/",
		Rule: engine.Rule{
			Concurrency: []floodgate.Concurrency{{Name: "inflight", Max: 2}},
		},
	}}}, h)
	entered.Add(2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { do(t, "GET", srv.URL+"/slow") })
	}
	entered.Wait()
	resp := do(t, "GET", srv.URL+"/slow")
	if resp.StatusCode != 429 || resp.Header.Get("RateLimit") != `"inflight";r=0` {
		t.Fatalf("third in flight: %d RateLimit %q", resp.StatusCode, resp.Header.Get("RateLimit"))
	}
	if resp.Header.Get("RateLimit-Policy") != `"inflight";q=2;qu="concurrent-requests"` {
		t.Fatalf("RateLimit-Policy %q", resp.Header.Get("RateLimit-Policy"))
	}
	close(release)
	wg.Wait()
	// Panicking handlers give their slots back.
	for range 5 {
		req, _ := http.NewRequest("GET", srv.URL+"/panic", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	entered.Add(2)
	release = make(chan struct{})
	close(release)
	for range 2 {
		if resp := do(t, "GET", srv.URL+"/slow"); resp.StatusCode != 200 || resp.Header.Get("RateLimit") != `"inflight";r=1` {
			t.Fatalf("after panics: %d %q (a slot leaked)", resp.StatusCode, resp.Header.Get("RateLimit"))
		}
	}
}

func TestContentBytes(t *testing.T) {
	read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		io.WriteString(w, strconv.FormatInt(n, 10))
	})
	srv := serve(t, httplimit.Config{Rules: []httplimit.Rule{{
		Pattern: "POST /upload",
		Rule: engine.Rule{
			Policies: []floodgate.Policy{{Name: "upload", Algorithm: floodgate.FixedWindow, Quota: 1000, Window: time.Hour, Unit: floodgate.ContentBytes}},
		},
	}}}, read)
	post := func(body io.Reader) *http.Response {
		resp, err := http.Post(srv.URL+"/upload", "application/octet-stream", body)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post(strings.NewReader(strings.Repeat("x", 600)))
	// 400 bytes are left; r is cut to what q/w allows before the hour ends.
	lims, err := header.ParseLimit(resp.Header.Values("RateLimit")...)
	if resp.StatusCode != 200 || err != nil || resp.Header.Get("X-RateLimit-Remaining") != "400" || lims[0].Remaining > 400 || lims[0].Window < 1 || lims[0].Window > 3600 {
		t.Fatalf("600 bytes: %d %q", resp.StatusCode, resp.Header.Get("RateLimit"))
	}
	if resp.Header.Get("RateLimit-Policy") != `"upload";q=1000;qu="content-bytes";w=3600` {
		t.Fatalf("RateLimit-Policy %q", resp.Header.Get("RateLimit-Policy"))
	}
	if resp := post(strings.NewReader(strings.Repeat("x", 600))); resp.StatusCode != 429 {
		t.Fatalf("600 more bytes: %d", resp.StatusCode)
	}
	if resp := post(strings.NewReader(strings.Repeat("x", 2000))); resp.StatusCode != 413 {
		t.Fatalf("a body larger than the quota: %d, want 413", resp.StatusCode)
	}
	// Unknown length (chunked): counted while read, and stopped at the quota.
	pr, pw := io.Pipe()
	go func() { pw.Write([]byte(strings.Repeat("y", 700))); pw.Close() }()
	if resp := post(pr); resp.StatusCode != 413 {
		t.Fatalf("streamed 700 bytes over the 400 left: %d", resp.StatusCode)
	}
}

// TestSharedPolicyName: rules that name one policy alike share its budget
// for a key (two routes, one quota); rules that give one name two
// definitions are refused, since the store keeps state per name.
func TestSharedPolicyName(t *testing.T) {
	shared := policy("shared", floodgate.FixedWindow, 3, time.Minute)
	srv := serve(t, httplimit.Config{Rules: []httplimit.Rule{
		{Pattern: "/a", Rule: engine.Rule{Policies: []floodgate.Policy{shared}}},
		{Pattern: "/b", Rule: engine.Rule{Policies: []floodgate.Policy{shared}}},
	}}, ok)
	for i, path := range []string{"/a", "/b", "/a"} {
		if resp := do(t, "GET", srv.URL+path); resp.StatusCode != 200 {
			t.Fatalf("request %d (%s): %d, want 200", i+1, path, resp.StatusCode)
		}
	}
	if resp := do(t, "GET", srv.URL+"/b"); resp.StatusCode != 429 {
		t.Fatalf("4th request across /a and /b: %d, want 429 (one budget of 3)", resp.StatusCode)
	}

	st := testkit.Memory(t)
	bucket := policy("bucket", floodgate.GCRA, 3, time.Minute)
	full := bucket
	full.Burst = 3 // the default capacity, written out
	if _, err := httplimit.New(httplimit.Config{Store: st, Rules: []httplimit.Rule{
		{Pattern: "/a", Rule: engine.Rule{Policies: []floodgate.Policy{bucket}}},
		{Pattern: "/b", Rule: engine.Rule{Policies: []floodgate.Policy{full}}},
	}}); err != nil {
		t.Fatalf("Burst 0 and Burst = Quota are one policy: %v", err)
	}
	other := shared
	other.Algorithm = floodgate.GCRA
	_, err := httplimit.New(httplimit.Config{Store: st, Rules: []httplimit.Rule{
		{Rule: engine.Rule{Name: "first", Policies: []floodgate.Policy{shared}}, Pattern: "/a"},
		{Rule: engine.Rule{Name: "second", Policies: []floodgate.Policy{other}}, Pattern: "/b"},
	}})
	if !errors.Is(err, floodgate.ErrInvalidPolicy) || !strings.Contains(err.Error(), `policy "shared" is defined differently by rules "first" (fixed-window 3 per 1m0s) and "second" (gcra 3 per 1m0s)`) {
		t.Fatalf("New with two definitions of one name: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	st := testkit.Memory(t)
	for name, cfg := range map[string]httplimit.Config{
		"bad pattern":      {Store: st, Rules: []httplimit.Rule{{Pattern: "login", Rule: engine.Rule{Policies: []floodgate.Policy{policy("p", floodgate.GCRA, 1, time.Second)}}}}},
		"bad policy":       {Store: st, Rules: []httplimit.Rule{{Pattern: "/", Rule: engine.Rule{Policies: []floodgate.Policy{policy("p", floodgate.GCRA, 0, time.Second)}}}}},
		"no policies":      {Store: st, Rules: []httplimit.Rule{{Pattern: "/"}}},
		"throttle":         {Store: st, Rules: []httplimit.Rule{{Pattern: "/", Rule: engine.Rule{Mode: engine.Throttle, Policies: []floodgate.Policy{policy("p", floodgate.GCRA, 1, time.Second)}}}}},
		"no store":         {},
		"engine and store": {Engine: newEngine(t, engine.Config{Store: st}), Store: st},
		"negative lease":   {Store: st, Rules: []httplimit.Rule{{Pattern: "/", Rule: engine.Rule{Lease: -time.Second, Concurrency: []floodgate.Concurrency{{Name: "inflight", Max: 1}}}}}},
		"empty token":      {Store: st, Bypass: httplimit.Bypass{Tokens: []string{""}}},
		"skip":             {Store: st, Skip: []string{"health"}},
		"local missing":    {Store: st, Rules: []httplimit.Rule{{Pattern: "/", Rule: engine.Rule{FailureMode: floodgate.FailToLocal, Policies: []floodgate.Policy{policy("p", floodgate.GCRA, 1, time.Second)}}}}},
		"header style":     {Store: st, Headers: 9},
		"reset style":      {Store: st, ResetStyle: header.ResetDate},
		"warn at":          {Store: st, WarnAt: 90},
		"bypass header":    {Store: st, Bypass: httplimit.Bypass{Header: "bad header:"}},
		"nil key part":     {Store: st, Rules: []httplimit.Rule{{Pattern: "/", Key: []httplimit.KeyPart{nil}, Rule: engine.Rule{Policies: []floodgate.Policy{policy("p", floodgate.GCRA, 1, time.Second)}}}}},
		"failure mode":     {Store: st, Rules: []httplimit.Rule{{Pattern: "/", Rule: engine.Rule{FailureMode: 9, Policies: []floodgate.Policy{policy("p", floodgate.GCRA, 1, time.Second)}}}}},
		"local share":      {Engine: newEngine(t, engine.Config{Store: st, Local: st}), Rules: []httplimit.Rule{{Pattern: "/", Rule: engine.Rule{FailureMode: floodgate.FailToLocal, LocalShare: 5, Policies: []floodgate.Policy{policy("p", floodgate.GCRA, 1, time.Second)}}}}},
		"local share NaN":  {Engine: newEngine(t, engine.Config{Store: st, Local: st}), Rules: []httplimit.Rule{{Pattern: "/", Rule: engine.Rule{FailureMode: floodgate.FailToLocal, LocalShare: math.NaN(), Policies: []floodgate.Policy{policy("p", floodgate.GCRA, 1, time.Second)}}}}},
		"warn at NaN":      {Store: st, WarnAt: math.NaN()},
		"local, no slots": {Engine: newEngine(t, engine.Config{Store: st, Local: struct{ floodgate.Store }{st}}), Rules: []httplimit.Rule{{Pattern: "/",
			Rule: engine.Rule{
				FailureMode: floodgate.FailToLocal,
				Concurrency: []floodgate.Concurrency{{Name: "inflight", Max: 1}},
			}}}},
		"max body": {Store: st, Rules: []httplimit.Rule{{Pattern: "/", MaxBodyBytes: -1, Rule: engine.Rule{Policies: []floodgate.Policy{policy("p", floodgate.GCRA, 1, time.Second)}}}}},
		"rule behind a broader one": {Store: st, Rules: []httplimit.Rule{
			{Pattern: "/", Rule: engine.Rule{Policies: []floodgate.Policy{policy("p", floodgate.GCRA, 1, time.Second)}}},
			{Pattern: "POST /login", Rule: engine.Rule{Policies: []floodgate.Policy{policy("q", floodgate.GCRA, 1, time.Second)}}}}},
		"rule behind a skip": {Store: st, Skip: []string{"/internal/"}, Rules: []httplimit.Rule{
			{Pattern: "GET /internal/stats", Rule: engine.Rule{Policies: []floodgate.Policy{policy("p", floodgate.GCRA, 1, time.Second)}}}}},
		"same name": {Store: st, Rules: []httplimit.Rule{
			{Rule: engine.Rule{Name: "x", Policies: []floodgate.Policy{policy("p", floodgate.GCRA, 1, time.Second)}}, Pattern: "/a"},
			{Rule: engine.Rule{Name: "x", Policies: []floodgate.Policy{policy("p", floodgate.GCRA, 1, time.Second)}}, Pattern: "/b"}}},
	} {
		if _, err := httplimit.New(cfg); err == nil {
			t.Errorf("%s: New succeeded, want an error", name)
		}
	}
}

func TestRetryAfterNeverBeforeT(t *testing.T) {
	// Sliding window counter: RetryAfter (exact) can be shorter than the
	// window's end; the 429's Retry-After still equals the violated t.
	srv := serve(t, httplimit.Config{Rules: []httplimit.Rule{{
		Pattern: "/", Rule: engine.Rule{Policies: []floodgate.Policy{policy("swc", floodgate.SlidingWindowCounter, 3, 2*time.Second)}},
	}}}, ok)
	var resp *http.Response
	for range 4 {
		resp = do(t, "GET", srv.URL+"/")
	}
	lims, err := header.ParseLimit(resp.Header.Values("RateLimit")...)
	if err != nil || resp.StatusCode != 429 {
		t.Fatal(resp.StatusCode, err)
	}
	ra, _ := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
	if ra < lims[0].Window || ra < 1 {
		t.Fatalf("Retry-After %d before the end of t=%d", ra, lims[0].Window)
	}
}

// TestPlans: policies chosen per request (K6), behind an IP guard (K7).
func TestPlans(t *testing.T) {
	tiers := map[string]engine.Plan{
		"free-key": {Name: "free", Policies: []floodgate.Policy{policy("free", floodgate.FixedWindow, 2, time.Minute)}},
		"pro-key":  {Name: "pro", Policies: []floodgate.Policy{policy("pro", floodgate.FixedWindow, 4, time.Minute)}},
	}
	lookups := 0
	srv := serve(t, httplimit.Config{Rules: []httplimit.Rule{{
		Pattern: "/api/",
		Rule: engine.Rule{
			Policies: []floodgate.Policy{policy("ip-guard", floodgate.FixedWindow, 8, time.Minute)},
		},
		Plan: func(r *http.Request) (engine.Plan, error) {
			lookups++
			k := r.Header.Get("X-API-Key")
			if k == "" {
				return engine.Plan{}, &httplimit.Reject{Status: 401, Problem: header.Problem{Title: "api_key_required", Status: 401}}
			}
			p, ok := tiers[k]
			if !ok {
				return engine.Plan{}, &httplimit.Reject{Status: 401, Problem: header.Problem{Title: "invalid_api_key", Status: 401}}
			}
			p.Key = "tenant-" + k
			return p, nil
		},
	}}}, ok)
	codes := func(key string, n int) []int {
		var out []int
		for range n {
			out = append(out, do(t, "GET", srv.URL+"/api/x", "X-API-Key", key).StatusCode)
		}
		return out
	}
	if got := fmt.Sprint(codes("", 1), codes("nope", 1), codes("free-key", 3)); got != "[401] [401] [200 200 429]" {
		t.Fatalf("missing, unknown, free: %s", got)
	}
	resp := do(t, "GET", srv.URL+"/api/x", "X-API-Key", "pro-key")
	if resp.Header.Get("RateLimit-Policy") != `"ip-guard";q=8;w=60, "pro";q=4;w=60` {
		t.Fatalf("pro plan's RateLimit-Policy %q", resp.Header.Get("RateLimit-Policy"))
	}
	// The IP guard (8 per minute) has seen 6 requests; two more pass, then
	// it refuses before any lookup.
	codes("pro-key", 2)
	before := lookups
	if got := codes("pro-key", 3); fmt.Sprint(got) != "[429 429 429]" || lookups != before {
		t.Fatalf("guard: %v, lookups %d → %d", got, before, lookups)
	}
}

type recorder struct {
	mu     sync.Mutex
	events []engine.Event
}

func (r *recorder) Observe(e engine.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// count returns how many events so far satisfy match.
func (r *recorder) count(match func(engine.Event) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if match(e) {
			n++
		}
	}
	return n
}

type blockList map[string]bool

func (b blockList) Blocked(rule, key string) (time.Duration, bool) { return 90 * time.Second, b[key] }

// halved halves every quota until the time it holds (Unix ns).
type halved struct{ until atomic.Int64 }

func (h *halved) Factor(policy string) (float64, time.Time) {
	if until := h.until.Load(); time.Now().UnixNano() < until {
		return 0.5, time.Unix(0, until)
	}
	return 1, time.Time{}
}

func TestObserverBlockerCapacity(t *testing.T) {
	rec := &recorder{}
	reduction := &halved{}
	srv := serve(t, httplimit.Config{
		Engine:   newEngine(t, engine.Config{Observer: rec, Blocker: blockList{"192.0.2.66": true}, Capacity: reduction}),
		ClientIP: mustResolver(t),
		Rules:    []httplimit.Rule{{Pattern: "/", Rule: engine.Rule{Policies: []floodgate.Policy{policy("p", floodgate.FixedWindow, 4, time.Hour)}}}},
	}, ok)

	// Blocked key: 429 with the abnormal-usage type.
	resp, err := http.DefaultClient.Do(func() *http.Request {
		r, _ := http.NewRequest("GET", srv.URL+"/", nil)
		r.Header.Set("X-Forwarded-For", "192.0.2.66")
		return r
	}())
	if err != nil {
		t.Fatal(err)
	}
	var p header.Problem
	json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if resp.StatusCode != 429 || p.Type != header.ProblemAbnormalUsageDetected || resp.Header.Get("Retry-After") != "90" {
		t.Fatalf("blocked: %d %q %q", resp.StatusCode, p.Type, resp.Header.Get("Retry-After"))
	}

	// Halved to 2: the 3rd request gets 503 temporary-reduced-capacity, and
	// RateLimit-Policy shows the lowered quota.
	reduction.until.Store(time.Now().Add(time.Hour).UnixNano())
	do(t, "GET", srv.URL+"/")
	do(t, "GET", srv.URL+"/")
	resp, _ = http.Get(srv.URL + "/")
	json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if resp.StatusCode != 503 || p.Type != header.ProblemTemporaryReducedCapacity || resp.Header.Get("RateLimit-Policy") != `"p";q=2;w=3600` || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("reduced: %d %q %q", resp.StatusCode, p.Type, resp.Header.Get("RateLimit-Policy"))
	}
	// Reduction over: the full quota of 4 applies again.
	reduction.until.Store(0)
	if resp := do(t, "GET", srv.URL+"/"); resp.StatusCode != 200 || resp.Header.Get("RateLimit-Policy") != `"p";q=4;w=3600` {
		t.Fatalf("after the reduction: %d %q", resp.StatusCode, resp.Header.Get("RateLimit-Policy"))
	}
	if resp := do(t, "GET", srv.URL+"/"); resp.StatusCode != 200 {
		t.Fatalf("4th: %d", resp.StatusCode)
	}
	if resp := do(t, "GET", srv.URL+"/"); resp.StatusCode != 429 {
		t.Fatalf("5th over the full quota: %d, want 429", resp.StatusCode)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	n := map[engine.Verdict]int{}
	for _, e := range rec.events {
		n[e.Verdict]++
	}
	if n[engine.Allowed] != 4 || n[engine.Reduced] != 1 || n[engine.Denied] != 1 || n[engine.Blocked] != 1 || len(n) != 4 {
		t.Fatalf("observed %v, want 4 allowed, 1 reduced, 1 denied, 1 blocked", n)
	}
}

func mustResolver(t *testing.T) *clientip.Resolver {
	r, err := clientip.New(clientip.Config{TrustedProxies: []string{"127.0.0.0/8", "::1/128"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReductionOverFullQuota: a client already over its full quota gets
// 429, not the reduction's 503.
func TestReductionOverFullQuota(t *testing.T) {
	reduction := &halved{}
	srv := serve(t, httplimit.Config{Engine: newEngine(t, engine.Config{Capacity: reduction}), Rules: []httplimit.Rule{{
		Pattern: "/", Rule: engine.Rule{Policies: []floodgate.Policy{policy("p", floodgate.FixedWindow, 4, time.Hour)}},
	}}}, ok)
	for range 4 {
		do(t, "GET", srv.URL+"/")
	}
	reduction.until.Store(time.Now().Add(time.Hour).UnixNano())
	if resp := do(t, "GET", srv.URL+"/"); resp.StatusCode != 429 {
		t.Fatalf("over the full quota under a reduction: %d, want 429", resp.StatusCode)
	}
}

// TestRejectStatus: a Plan's Reject must carry an error status; any other
// is answered 500, never written as given (0 would panic in net/http).
func TestRejectStatus(t *testing.T) {
	for _, status := range []int{0, 200, 999} {
		srv := serve(t, httplimit.Config{Rules: []httplimit.Rule{{Pattern: "/",
			Plan: func(r *http.Request) (engine.Plan, error) {
				return engine.Plan{}, &httplimit.Reject{Status: status}
			}}}}, ok)
		if resp := do(t, "GET", srv.URL); resp.StatusCode != 500 {
			t.Errorf("Reject{Status: %d}: %d, want 500", status, resp.StatusCode)
		}
	}
}

// TestUnknownClientAddress: requests without a client address (a Unix
// socket's "@") share one partition, and the middleware says so in its
// log, once a minute rather than per request; TrustSocketPeers lets a
// local proxy's X-Forwarded-For name the client instead.
func TestUnknownClientAddress(t *testing.T) {
	st := testkit.Memory(t)
	rule := httplimit.Rule{Pattern: "/", Rule: engine.Rule{Policies: []floodgate.Policy{policy("ip", floodgate.FixedWindow, 1, time.Hour)}}}
	// codes sends one request per X-Forwarded-For value from the socket
	// peer "@" and returns the statuses.
	codes := func(cfg httplimit.Config, xffs ...string) string {
		cfg.Store, cfg.Rules = st, []httplimit.Rule{rule}
		mw, err := httplimit.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, xff := range xffs {
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = "@"
			req.Header.Set("X-Forwarded-For", xff)
			rec := httptest.NewRecorder()
			mw.Wrap(ok).ServeHTTP(rec, req)
			got = append(got, rec.Code)
		}
		return fmt.Sprint(got)
	}
	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	if got := codes(httplimit.Config{Logger: logger}, "198.51.100.1", "198.51.100.2"); got != "[200 429]" ||
		strings.Count(logs.String(), "client address unknown") != 1 {
		t.Fatalf("socket peer, not trusted: %v; log:\n%s", got, logs.String())
	}
	trusting, _ := clientip.New(clientip.Config{TrustSocketPeers: true})
	if got := codes(httplimit.Config{Logger: quiet, ClientIP: trusting}, "198.51.100.3", "198.51.100.4", "198.51.100.3"); got != "[200 200 429]" {
		t.Fatalf("socket peer, trusted: %v, want each client its own partition", got)
	}
}

// TestInnerLayerReplacesFields: behind two middlewares of the same header
// style the inner one's fields replace the outer one's, its warning
// included, so the response does not mix fields of two policies.
func TestInnerLayerReplacesFields(t *testing.T) {
	st := testkit.Memory(t)
	layer := func(p floodgate.Policy) *httplimit.Middleware {
		mw, err := httplimit.New(httplimit.Config{Store: st, Logger: quiet, Rules: []httplimit.Rule{{Pattern: "/", Rule: engine.Rule{Policies: []floodgate.Policy{p}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return mw
	}
	outer := layer(policy("outer", floodgate.FixedWindow, 1, time.Hour)) // 1 of 1 used: a warning
	inner := layer(policy("inner", floodgate.FixedWindow, 100, time.Hour))
	rec := httptest.NewRecorder()
	outer.Wrap(inner.Wrap(ok)).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	h := rec.Header()
	if h.Get("RateLimit-Policy") != `"inner";q=100;w=3600` || h.Get("X-RateLimit-Limit") != "100" || h.Values("X-RateLimit-Warning") != nil {
		t.Fatalf("fields behind two layers: %v", h)
	}
	// Alone, a layer like the outer one does send the warning that the
	// inner one dropped.
	rec = httptest.NewRecorder()
	layer(policy("alone", floodgate.FixedWindow, 1, time.Hour)).Wrap(ok).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if !strings.Contains(rec.Header().Get("X-RateLimit-Warning"), `"alone": 1 of 1 used`) {
		t.Fatalf("outer alone: %v", rec.Header())
	}
}

// TestWrapNil: a nil handler is refused when the middleware is set up, as
// http.Handle does, not on the first request.
func TestWrapNil(t *testing.T) {
	mw, err := httplimit.New(httplimit.Config{Store: testkit.Memory(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r != "httplimit: Wrap(nil)" {
			t.Errorf("Wrap(nil) panicked with %v", r)
		}
	}()
	mw.Wrap(nil)
	t.Error("Wrap(nil) returned")
}
