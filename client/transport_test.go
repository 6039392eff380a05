package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
)

// refuseOnce answers the first request with 429 and the given header
// lines, then 200; it records each attempt's body and attempt header.
type refuseOnce struct {
	mu       sync.Mutex
	n        int
	bodies   []string
	attempts []string
	hdr      []string
}

func (s *refuseOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	var b []byte
	if r.Body != nil {
		b, _ = io.ReadAll(r.Body)
	}
	s.bodies = append(s.bodies, string(b))
	s.attempts = append(s.attempts, r.Header.Get("Floodgate-Attempt"))
	if s.n == 1 {
		return respond(r, 429, "", s.hdr...), nil
	}
	return respond(r, 200, "ok"), nil
}

func TestRetriesOnlyIdempotent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		req      func() *http.Request
		attempts int
	}{
		{"GET", func() *http.Request { r, _ := http.NewRequest("GET", "https://a.example/", nil); return r }, 2},
		{"DELETE", func() *http.Request { r, _ := http.NewRequest("DELETE", "https://a.example/", nil); return r }, 2},
		{"POST", func() *http.Request {
			r, _ := http.NewRequest("POST", "https://a.example/", strings.NewReader("x"))
			return r
		}, 1},
		{"POST with Idempotency-Key", func() *http.Request {
			r, _ := http.NewRequest("POST", "https://a.example/", strings.NewReader("payload"))
			r.Header.Set("Idempotency-Key", "k1")
			return r
		}, 2},
		{"PUT without GetBody", func() *http.Request {
			r, _ := http.NewRequest("PUT", "https://a.example/", io.NopCloser(strings.NewReader("payload")))
			return r
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			srv := &refuseOnce{hdr: []string{"Retry-After: 2"}}
			tr := newTestTransport(t, srv, append(virtual(clk), WithAttemptHeader("Floodgate-Attempt"))...)
			req := tc.req()
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if srv.n != tc.attempts {
				t.Fatalf("%d attempts, want %d", srv.n, tc.attempts)
			}
			if tc.attempts == 2 {
				if resp.StatusCode != 200 || srv.bodies[0] != srv.bodies[1] || strings.Join(srv.attempts, ",") != "1,2" {
					t.Fatalf("status %d bodies %q attempts %q", resp.StatusCode, srv.bodies, srv.attempts)
				}
				// Retry-After 2 s plus jitter 0.5 × 20 % × 2 s.
				if got := clk.Now().Sub(newFakeClock().Now()); got < 2*time.Second || got > 2400*time.Millisecond {
					t.Fatalf("retried after %v, want 2.2s", got)
				}
			} else if resp.StatusCode != 429 {
				t.Fatalf("status %d, want the 429 back", resp.StatusCode)
			}
			if req.Header.Get("Floodgate-Attempt") != "" {
				t.Fatalf("the caller's request was modified")
			}
		})
	}
}

// Retry-After takes precedence over t (draft-11 §7, C5).
func TestRetryAfterPrecedence(t *testing.T) {
	clk := newFakeClock()
	srv := &refuseOnce{hdr: []string{"Retry-After: 3", `RateLimit: "m";r=0;t=20`}}
	hc := &http.Client{Transport: newTestTransport(t, srv, append(virtual(clk), WithJitter(0))...)}
	start := clk.Now()
	get(t, hc, "https://a.example/")
	if got := clk.Now().Sub(start); got != 3*time.Second {
		t.Fatalf("waited %v, want Retry-After's 3s, not t's 20s", got)
	}
	// Without Retry-After the exhausted t governs.
	clk2 := newFakeClock()
	srv2 := &refuseOnce{hdr: []string{`RateLimit: "m";r=0;t=20`}}
	hc2 := &http.Client{Transport: newTestTransport(t, srv2, append(virtual(clk2), WithJitter(0))...)}
	get(t, hc2, "https://a.example/")
	if got := clk2.Now().Sub(start); got != 20*time.Second {
		t.Fatalf("waited %v, want t = 20s", got)
	}
	// A wait beyond the maximum is not retried: the 429 comes back at once.
	clk3 := newFakeClock()
	srv3 := &refuseOnce{hdr: []string{"Retry-After: 3600"}}
	hc3 := &http.Client{Transport: newTestTransport(t, srv3, virtual(clk3)...)}
	if resp := get(t, hc3, "https://a.example/"); resp.StatusCode != 429 || srv3.n != 1 || clk3.Now() != start {
		t.Fatalf("status %d after %d attempts and %v", resp.StatusCode, srv3.n, clk3.Now().Sub(start))
	}
}

func TestCachedValuesIgnored(t *testing.T) {
	clk := newFakeClock()
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		return respond(r, 200, "", "Age: 120", `RateLimit: "m";r=0;t=30`), nil
	})
	tr := newTestTransport(t, base, virtual(clk)...)
	hc := &http.Client{Transport: tr}
	start := clk.Now()
	for range 5 {
		get(t, hc, "https://a.example/")
	}
	if got := clk.Now().Sub(start); got > time.Second {
		t.Fatalf("a cached r=0 slowed the client down: %v", got)
	}
	if st, _ := tr.State("https://a.example"); len(st.Policies) != 0 {
		t.Fatalf("cached values stored: %+v", st.Policies)
	}
}

// TestExpiryProbeAndAIMD follows C4: after t the next request is a probe
// that goes alone; the pace factor restarts at 0.5 and grows by 0.25 per
// success; a 429 halves it.
func TestExpiryProbeAndAIMD(t *testing.T) {
	clk := newFakeClock()
	var status atomic.Int64
	status.Store(200)
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		return respond(r, int(status.Load()), "", `RateLimit-Policy: "m";q=100;w=10`, `RateLimit: "m";r=50;t=5`), nil
	})
	tr := newTestTransport(t, base, append(virtual(clk), WithMaxAttempts(1))...)
	hc := &http.Client{Transport: tr}
	factor := func() float64 { st, _ := tr.State("https://a.example"); return st.Factor }

	get(t, hc, "https://a.example/")
	if f := factor(); f != 1 {
		t.Fatalf("factor %v", f)
	}
	clk.Advance(6 * time.Second) // the observation (t=5) expires
	get(t, hc, "https://a.example/")
	if st := tr.Stats(); st.Probes != 1 {
		t.Fatalf("probes %d, want 1", st.Probes)
	}
	want := []float64{0.5, 0.75, 1, 1}
	if f := factor(); f != want[0] {
		t.Fatalf("after the probe factor %v, want %v", f, want[0])
	}
	for _, w := range want[1:] {
		get(t, hc, "https://a.example/")
		if f := factor(); f != w {
			t.Fatalf("factor %v, want %v", f, w)
		}
	}
	status.Store(429)
	get(t, hc, "https://a.example/")
	if f := factor(); f != 0.5 {
		t.Fatalf("after a 429 factor %v, want 0.5", f)
	}
	st, _ := tr.State("https://a.example")
	if !st.BlockedUntil.After(clk.Now()) || !st.NeedProbe {
		t.Fatalf("a 429 must block and require a probe: %+v", st)
	}
}

// While a probe is in flight, other requests to the origin wait for it.
func TestProbeGoesAlone(t *testing.T) {
	release := make(chan struct{})
	var inFlight, peak atomic.Int64
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		return respond(r, 200, "", `RateLimit: "m";r=100;t=1`), nil
	})
	tr := newTestTransport(t, base, WithLogger(quiet), WithRate(1000, 100))
	hc := &http.Client{Transport: tr}
	o := tr.origin("http://a.example")
	o.needProbe = true
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() { defer wg.Done(); get(t, hc, "http://a.example/") }()
	}
	time.Sleep(50 * time.Millisecond)
	if n := inFlight.Load(); n != 1 {
		t.Fatalf("%d requests in flight during the probe, want 1", n)
	}
	close(release)
	wg.Wait()
	if tr.Stats().Probes != 1 {
		t.Fatalf("probes %d", tr.Stats().Probes)
	}
}

func TestConcurrencyCap(t *testing.T) {
	var inFlight, peak atomic.Int64
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		inFlight.Add(-1)
		return respond(r, 200, "ok"), nil
	})
	hc := &http.Client{Transport: newTestTransport(t, base, WithLogger(quiet), WithConcurrency(2), WithRate(10000, 100))}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() { defer wg.Done(); get(t, hc, "http://a.example/") }()
	}
	wg.Wait()
	if p := peak.Load(); p != 2 {
		t.Fatalf("peak in flight %d, want 2", p)
	}
}

func TestBytesPerSecond(t *testing.T) {
	clk := newFakeClock()
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		io.Copy(io.Discard, r.Body)
		return respond(r, 200, "ok"), nil
	})
	hc := &http.Client{Transport: newTestTransport(t, base, append(virtual(clk), WithBytesPerSecond(1000, 100))...)}
	start := clk.Now()
	resp, err := hc.Post("https://a.example/", "text/plain", bytes.NewReader(make([]byte, 5000)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// 5000 bytes at 1000/s after a 100-byte burst: 4.9 s.
	if got := clk.Now().Sub(start); got < 4800*time.Millisecond || got > 5*time.Second {
		t.Fatalf("5000 bytes took %v at 1000 B/s", got)
	}
}

func TestCircuitBreaker(t *testing.T) {
	var calls atomic.Int64
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		return respond(r, 500, "boom"), nil
	})
	hc := &http.Client{Transport: newTestTransport(t, base, WithLogger(quiet), WithRate(1000, 100), WithMaxAttempts(1),
		WithBreaker(BreakerSettings{Failures: 3, OpenFor: 50 * time.Millisecond}))}
	for range 3 {
		get(t, hc, "http://a.example/")
	}
	_, err := hc.Get("http://a.example/")
	if !errors.Is(err, ErrCircuitOpen) || calls.Load() != 3 {
		t.Fatalf("err %v after %d calls, want ErrCircuitOpen after 3", err, calls.Load())
	}
	// After OpenFor the half-open breaker lets one trial through.
	time.Sleep(60 * time.Millisecond)
	if resp := get(t, hc, "http://a.example/"); resp.StatusCode != 500 || calls.Load() != 4 {
		t.Fatalf("half-open trial: status %d calls %d", resp.StatusCode, calls.Load())
	}
}

func TestBreakerIgnoresRateSignals(t *testing.T) {
	clk := newFakeClock()
	var calls atomic.Int64
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		return respond(r, 429, "", "Retry-After: 0"), nil
	})
	hc := &http.Client{Transport: newTestTransport(t, base, append(virtual(clk), WithMaxAttempts(1), WithBreaker(BreakerSettings{Failures: 2}))...)}
	for range 5 {
		if _, err := hc.Get("http://a.example/"); err != nil {
			t.Fatalf("429s opened the breaker: %v", err)
		}
	}
}

// A 503 temporary-reduced-capacity problem cuts the pace like a 429 and
// the lower RateLimit-Policy it carries takes effect.
func TestTemporaryReducedCapacity(t *testing.T) {
	clk := newFakeClock()
	var n atomic.Int64
	body, _ := json.Marshal(header.Problem{Type: header.ProblemTemporaryReducedCapacity, Title: "Temporary Reduced Capacity", Status: 503, ViolatedPolicies: []string{"minute"}})
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		if n.Add(1) == 1 {
			return respond(r, 503, string(body), "Content-Type: application/problem+json", "Retry-After: 4", `RateLimit-Policy: "minute";q=6;w=60`), nil
		}
		return respond(r, 200, "ok", `RateLimit-Policy: "minute";q=6;w=60`, `RateLimit: "minute";r=5;t=60`), nil
	})
	tr := newTestTransport(t, base, append(virtual(clk), WithJitter(0))...)
	hc := &http.Client{Transport: tr}
	resp, err := hc.Get("https://a.example/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || n.Load() != 2 || string(b) != "ok" {
		t.Fatalf("status %d after %d attempts", resp.StatusCode, n.Load())
	}
	st, _ := tr.State("https://a.example")
	// Cut to 0.5, then the retry was the probe (factor stays 0.5); the
	// pace is r/t = 5/60 (tighter than q/w = 6/60) slowed by the factor:
	// one request per 24 s.
	if st.Factor != 0.5 || st.Interval != 24*time.Second {
		t.Fatalf("factor %v interval %v", st.Factor, st.Interval)
	}
	if tr.Stats().Refusals != 1 {
		t.Fatalf("refusals %d", tr.Stats().Refusals)
	}
}

func TestPartitionKeyPrediction(t *testing.T) {
	clk := newFakeClock()
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		return respond(r, 200, "", `RateLimit: "u";r=0;t=30;pk=:YWxpY2U=:`), nil // "alice" is exhausted
	})
	pk := func(r *http.Request) ([]byte, bool) { return []byte(r.Header.Get("X-User")), true }
	hc := &http.Client{Transport: newTestTransport(t, base, append(virtual(clk), WithPartitionKey(pk))...)}
	do := func(user string) {
		r, _ := http.NewRequest("GET", "https://a.example/", nil)
		r.Header.Set("X-User", user)
		resp, err := hc.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	do("alice")
	start := clk.Now()
	do("bob")
	if clk.Now().Sub(start) > time.Second {
		t.Fatalf("bob waited for alice's partition")
	}
	do("alice")
	if clk.Now().Sub(start) < 30*time.Second {
		t.Fatalf("alice did not wait for her exhausted partition: %v", clk.Now().Sub(start))
	}
}

func TestAuditRecord(t *testing.T) {
	var buf testkit.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clk := newFakeClock()
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		return respond(r, 200, "", `RateLimit-Policy: "up";q=1000;qu="content-bytes";w=60;pk=:dXNlcjo0Mg==:`,
			`RateLimit: "up";r=400;t=30;pk=:dXNlcjo0Mg==:`), nil
	})
	hc := &http.Client{Transport: newTestTransport(t, base, WithClock(clk.Now), WithSleep(clk.Sleep), WithLogger(logger))}
	r, _ := http.NewRequest("GET", "https://a.example/files/1?token=secret", nil)
	r.Header.Set("X-Request-Id", "req-7")
	resp, err := hc.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var rec map[string]any
	logged := buf.String()
	if err := json.Unmarshal([]byte(strings.Split(logged, "\n")[0]), &rec); err != nil {
		t.Fatalf("%v: %s", err, logged)
	}
	want := map[string]any{
		"msg": "ratelimit observation", "origin": "https://a.example", "policy": "up", "unit": "content-bytes",
		"pk": "dXNlcjo0Mg==", "q": 1000.0, "w": 60.0, "r": 400.0, "t": 30.0, "status": 200.0, "method": "GET",
		"path": "/files/1", "attempt": 1.0, "within_signal": false, "request_id": "req-7", "dialect": "draft-11",
		"time": clk.Now().Format(time.RFC3339Nano),
	}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("%s = %v, want %v", k, rec[k], v)
		}
	}
	if strings.Contains(logged, "secret") {
		t.Errorf("the query string leaked into the audit log")
	}
}

func TestProbeOutput(t *testing.T) {
	store := testkit.Memory(t)
	mw, err := httplimit.New(httplimit.Config{Store: store, Logger: quiet,
		Rules: []httplimit.Rule{{Pattern: "/", Rule: engine.Rule{Policies: []floodgate.Policy{{Name: "api", Algorithm: floodgate.GCRA, Quota: 10, Window: 10 * time.Second}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer srv.Close()
	var out bytes.Buffer
	if err := Probe(context.Background(), &http.Client{Transport: newTestTransport(t, nil, WithLogger(quiet))}, srv.URL+"/x", &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"GET " + srv.URL + "/x -> 200 OK", "dialect: draft-11", "POLICY", `"api"   requests  -   10  10  9  9  1.000`, "1.000", "next: send at most one request every 1s"} {
		if !strings.Contains(s, want) {
			t.Errorf("probe output lacks %q:\n%s", want, s)
		}
	}
	if err := Probe(context.Background(), nil, "http://127.0.0.1:1/", io.Discard); err == nil {
		t.Errorf("no error for an unreachable URL")
	}
}
