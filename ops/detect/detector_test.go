package detect_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/opstest"
	"github.com/floodgate/floodgate/ops/detect"
)

// hookServer records webhook deliveries; fail makes the first calls answer
// 503.
type hookServer struct {
	*httptest.Server
	mu     sync.Mutex
	calls  int
	alerts []detect.Alert
	ctype  string
	fail   int
}

func newHookServer(t *testing.T, fail int) *hookServer {
	h := &hookServer{fail: fail}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calls++
		h.ctype = r.Header.Get("Content-Type")
		if h.calls <= h.fail {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var a detect.Alert
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		h.alerts = append(h.alerts, a)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) state() (int, []detect.Alert) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls, append([]detect.Alert(nil), h.alerts...)
}

// TestAbuseAlert is the case: 150 limited requests from one IP
// within a minute give exactly one alert (one log record, one counter
// increment, one webhook call), and with blocking on, the IP then gets 429
// abnormal-usage-detected for the block's duration, after which it lifts.
func TestAbuseAlert(t *testing.T) {
	for _, block := range []time.Duration{0, 30 * time.Second} {
		name := "alert-only"
		if block > 0 {
			name = "alert-and-block"
		}
		t.Run(name, func(t *testing.T) {
			clk := opstest.NewClock()
			hook := newHookServer(t, 0)
			logs := &opstest.LogBuffer{}
			reg := prometheus.NewRegistry()
			det, err := detect.NewDetector(detect.DetectorConfig{
				Default:    detect.AbuseRule{Block: block},
				Webhook:    &detect.WebhookConfig{URL: hook.URL, Timeout: time.Second, Backoff: 10 * time.Millisecond},
				Logger:     logs.Logger(),
				Registerer: reg,
				Now:        clk.Now,
			})
			if err != nil {
				t.Fatal(err)
			}
			srv := opstest.ServeMW(t, httplimit.Config{
				Engine: opstest.Engine(t, engine.Config{Observer: det, Blocker: det}),
				Rules:  []httplimit.Rule{{Rule: engine.Rule{Name: "api", Policies: []floodgate.Policy{opstest.Pol("api", 5, time.Hour)}}, Pattern: "/"}},
			})
			const ip = "198.51.100.7"
			var allowed, limited, blocked int
			var firstBlock opstest.Reply
			// 5 allowed + 150 limited, 100 ms apart: 15.5 s of test time.
			for range 155 {
				r := opstest.Get(t, srv.URL, "/", ip)
				switch {
				case r.Status == 200:
					allowed++
				case r.Status == 429 && r.Problem.Type == header.ProblemQuotaExceeded:
					limited++
				case r.Status == 429 && r.Problem.Type == header.ProblemAbnormalUsageDetected:
					if blocked == 0 {
						firstBlock = r
					}
					blocked++
				default:
					t.Fatalf("unexpected answer %d %q", r.Status, r.Problem.Type)
				}
				clk.Advance(100 * time.Millisecond)
			}
			if block == 0 && (allowed != 5 || limited != 150 || blocked != 0) {
				t.Fatalf("allowed %d, limited %d, blocked %d; want 5, 150, 0", allowed, limited, blocked)
			}
			if block > 0 {
				// The 100th limited request raises the alert and the block;
				// the other 50 are refused by the block.
				if allowed != 5 || limited != 100 || blocked != 50 {
					t.Fatalf("allowed %d, limited %d, blocked %d; want 5, 100, 50", allowed, limited, blocked)
				}
				if firstBlock.Header.Get("Retry-After") != "30" || firstBlock.Problem.Title != "Abnormal Usage Detected" {
					t.Fatalf("first blocked answer: Retry-After %q, title %q", firstBlock.Header.Get("Retry-After"), firstBlock.Problem.Title)
				}
				// Another client is not blocked.
				if r := opstest.Get(t, srv.URL, "/", "198.51.100.8"); r.Status != 200 {
					t.Fatalf("other client: %d", r.Status)
				}
				// 30 s after the alert (raised at 10.4 s of test time; now
				// 15.5 s) the block lifts: the client is back to its
				// ordinary quota-exceeded answer.
				clk.Advance(block - 5100*time.Millisecond - time.Millisecond)
				if r := opstest.Get(t, srv.URL, "/", ip); r.Problem.Type != header.ProblemAbnormalUsageDetected || r.Header.Get("Retry-After") != "1" {
					t.Fatalf("just before the end: %d %q Retry-After %q", r.Status, r.Problem.Type, r.Header.Get("Retry-After"))
				}
				clk.Advance(time.Millisecond)
				if r := opstest.Get(t, srv.URL, "/", ip); r.Status != 429 || r.Problem.Type != header.ProblemQuotaExceeded {
					t.Fatalf("after the block: %d %q, want 429 quota-exceeded", r.Status, r.Problem.Type)
				}
				if got := testutil.ToFloat64(mustCounter(t, reg, "floodgate_abuse_blocked_total")); got != 51 {
					t.Fatalf("blocked counter %v, want 51", got)
				}
			}

			// Exactly one alert everywhere.
			if !opstest.Eventually(5*time.Second, func() bool { n, _ := hook.state(); return n >= 1 }) {
				t.Fatal("no webhook call within 5 s")
			}
			if err := det.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			calls, alerts := hook.state()
			if calls != 1 || len(alerts) != 1 {
				t.Fatalf("webhook calls %d, want 1", calls)
			}
			if hook.ctype != "application/json" {
				t.Fatalf("webhook Content-Type %q", hook.ctype)
			}
			a := alerts[0]
			fp := httplimit.Fingerprint(ip)
			if a.Type != "floodgate.abuse_detected" || a.Rule != "api" || a.Policy != "api" || a.Key != fp ||
				a.Count != 100 || a.Threshold != 100 || a.WindowSeconds != 60 {
				t.Fatalf("webhook payload %+v", a)
			}
			// The 100th limited request is the 105th request, sent at 10.4 s.
			if want := time.Date(2026, 3, 1, 12, 0, 10, 400e6, time.UTC); !a.Time.Equal(want) {
				t.Fatalf("alert time %v, want %v", a.Time, want)
			}
			if (block > 0) != (a.BlockedUntil != nil) || (block > 0 && !a.BlockedUntil.Equal(a.Time.Add(block))) {
				t.Fatalf("blocked_until %v with block %v", a.BlockedUntil, block)
			}
			// One WARN record and no ERROR: a client's abuse is not a
			// failure of the daemon.
			var warns []map[string]any
			for _, r := range logs.Records(t) {
				switch r["level"] {
				case "WARN":
					warns = append(warns, r)
				case "ERROR":
					t.Fatalf("an ERROR record: %v", r)
				}
			}
			if len(warns) != 1 || warns[0]["msg"] != "abuse detected" || warns[0]["key"] != fp || warns[0]["rule"] != "api" || warns[0]["count"] != float64(100) {
				t.Fatalf("warn records: %v", warns)
			}
			if got := testutil.ToFloat64(mustCounter(t, reg, "floodgate_abuse_alerts_total")); got != 1 {
				t.Fatalf("alerts counter %v, want 1", got)
			}
			if got := det.Alerts(); len(got) != 1 || got[0].Key != fp {
				t.Fatalf("Alerts() = %+v", got)
			}
		})
	}
}

// mustCounter returns the single series of a counter family in reg.
func mustCounter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			v := mf.GetMetric()[0].GetCounter().GetValue()
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
			c.Add(v)
			return c
		}
	}
	t.Fatalf("no single-series counter %s in the registry", name)
	return nil
}

// TestAbuseDedupPerWindow: sustained abuse alerts once per window, not once
// per request, and the count is a sliding window, not a total.
func TestAbuseDedupPerWindow(t *testing.T) {
	clk := opstest.NewClock()
	det, err := detect.NewDetector(detect.DetectorConfig{
		Rules:  map[string]detect.AbuseRule{"login": {Threshold: 10, Window: 10 * time.Second}},
		Logger: opstest.Quiet, Now: clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	ev := engine.Event{Verdict: engine.Denied, Rule: "login", Policy: "p", Key: "203.0.113.5"}
	// 9 per 10 s, evenly spread, never reaches 10 within any 10 s.
	for range 40 {
		det.Observe(ev)
		clk.Advance(10*time.Second/9 + time.Millisecond)
	}
	if n := len(det.Alerts()); n != 0 {
		t.Fatalf("%d alerts at 9 per window, want 0", n)
	}
	// 2 per second for 35 s: 70 limited events. The first alert comes at
	// the 10th event of the burst; then one per 10 s.
	for range 70 {
		det.Observe(ev)
		clk.Advance(500 * time.Millisecond)
	}
	al := det.Alerts()
	if len(al) != 4 {
		t.Fatalf("%d alerts over 35 s of sustained abuse with a 10 s window, want 4", len(al))
	}
	for i := 1; i < len(al); i++ {
		if gap := al[i].Time.Sub(al[i-1].Time); gap < 10*time.Second || gap > 11*time.Second {
			t.Fatalf("alert %d came %v after the previous one, want 10 s", i, gap)
		}
	}
	// Allowed, shadow and reduced-capacity events never count.
	det2, _ := detect.NewDetector(detect.DetectorConfig{Default: detect.AbuseRule{Threshold: 3}, Logger: opstest.Quiet, Now: clk.Now})
	for _, e := range []engine.Event{{Rule: "r", Key: "k"}, {Rule: "r", Key: "k", Shadow: true}, {Rule: "r", Key: "k", Verdict: engine.Reduced}, {Rule: "r", Key: "k", Verdict: engine.Blocked}} {
		for range 5 {
			det2.Observe(e)
		}
	}
	if n := len(det2.Alerts()); n != 0 {
		t.Fatalf("%d alerts from events that must not count", n)
	}
}

// TestAbuseKeyPart counts by the IP part of an "{ip}|{route}" key, so one
// IP spread over routes is one offender, and the block covers all routes.
func TestAbuseKeyPart(t *testing.T) {
	if got := detect.KeyPart(1)("r", "a|b|c"); got != "b" {
		t.Fatalf("KeyPart(1) = %q", got)
	}
	if got := detect.KeyPart(3)("r", "a|b|c"); got != "" {
		t.Fatalf("KeyPart(3) of 3 parts = %q", got)
	}
	if got := detect.KeyPart(0)("r", "-|b"); got != "" {
		t.Fatalf("absent part = %q", got)
	}
	clk := opstest.NewClock()
	det, _ := detect.NewDetector(detect.DetectorConfig{
		Rules:  map[string]detect.AbuseRule{"api": {Threshold: 6, Key: detect.KeyPart(0), Block: time.Minute}},
		Logger: opstest.Quiet, Now: clk.Now,
	})
	for i := range 6 {
		det.Observe(engine.Event{Verdict: engine.Denied, Rule: "api", Policy: "p", Key: "192.0.2.1|GET /r" + string(rune('0'+i%3))})
	}
	if n := len(det.Alerts()); n != 1 {
		t.Fatalf("%d alerts, want 1", n)
	}
	if d, ok := det.Blocked("api", "192.0.2.1|GET /other"); !ok || d != time.Minute {
		t.Fatalf("Blocked(other route) = %v %v, want 1m true", d, ok)
	}
	if _, ok := det.Blocked("api", "192.0.2.2|GET /r0"); ok {
		t.Fatal("another IP is blocked")
	}
	if _, ok := det.Blocked("other-rule", "192.0.2.1"); ok {
		t.Fatal("a block of rule api holds on another rule")
	}
	if b := det.Blocks(); len(b) != 1 || b[0].Key != httplimit.Fingerprint("192.0.2.1") {
		t.Fatalf("Blocks() = %+v", b)
	}
}

// TestWebhookRetries: a receiver failing twice with 503 gets the alert on
// the third attempt; one failing with 400 is not retried.
func TestWebhookRetries(t *testing.T) {
	for _, tc := range []struct {
		status       int
		fail         int
		wantCalls    int
		wantOutcomes string
	}{
		{503, 2, 3, "sent"},
		{400, 1, 1, "failed"},
	} {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			if int(calls.Add(1)) <= tc.fail {
				w.WriteHeader(tc.status)
			}
		}))
		reg := prometheus.NewRegistry()
		det, err := detect.NewDetector(detect.DetectorConfig{
			Default:    detect.AbuseRule{Threshold: 1},
			Webhook:    &detect.WebhookConfig{URL: srv.URL, Backoff: 5 * time.Millisecond, Attempts: 4},
			Logger:     opstest.Quiet,
			Registerer: reg,
		})
		if err != nil {
			t.Fatal(err)
		}
		det.Observe(engine.Event{Verdict: engine.Denied, Rule: "r", Policy: "p", Key: "k"})
		if err := det.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		if int(calls.Load()) != tc.wantCalls {
			t.Fatalf("status %d: %d calls, want %d", tc.status, calls.Load(), tc.wantCalls)
		}
		mfs, _ := reg.Gather()
		found := false
		for _, mf := range mfs {
			if mf.GetName() != "floodgate_abuse_webhook_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == tc.wantOutcomes && m.GetCounter().GetValue() == 1 {
					found = true
				}
			}
		}
		if !found {
			t.Fatalf("status %d: no webhook outcome %q counted once", tc.status, tc.wantOutcomes)
		}
	}
}

// TestWebhookNeverBlocks: a receiver that hangs delays neither Observe nor
// the requests; Close gives up when its context ends.
func TestWebhookNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	det, err := detect.NewDetector(detect.DetectorConfig{
		Default: detect.AbuseRule{Threshold: 1, Window: time.Nanosecond},
		Webhook: &detect.WebhookConfig{URL: srv.URL, Timeout: time.Minute, Queue: 2},
		Logger:  opstest.Quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 1000 {
		det.Observe(engine.Event{Verdict: engine.Denied, Rule: "r", Policy: "p", Key: strings.Repeat("k", i%50+1)})
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("1000 observations with a hanging webhook took %v", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := det.Close(ctx); err == nil {
		t.Fatal("Close with a hanging receiver returned nil, want the context's error")
	}
}

// TestDetectorBoundedKeys: a flood of distinct keys keeps the tracked keys
// within MaxKeys and still detects a key that crosses its threshold.
func TestDetectorBoundedKeys(t *testing.T) {
	det, _ := detect.NewDetector(detect.DetectorConfig{Default: detect.AbuseRule{Threshold: 50}, MaxKeys: 160, Logger: opstest.Quiet})
	for i := range 20_000 {
		det.Observe(engine.Event{Verdict: engine.Denied, Rule: "r", Policy: "p", Key: "spray-" + strconv.Itoa(i)})
		if i%100 == 0 {
			det.Observe(engine.Event{Verdict: engine.Denied, Rule: "r", Policy: "p", Key: "heavy"})
		}
	}
	al := det.Alerts()
	if len(al) != 1 || al[0].Key != httplimit.Fingerprint("heavy") {
		t.Fatalf("alerts %+v, want one for the heavy key", al)
	}
	if n := detect.TrackedKeys(det); n > 160 {
		t.Fatalf("%d keys tracked, want ≤ 160", n)
	}
}

func TestDetectorConfigErrors(t *testing.T) {
	if _, err := detect.NewDetector(detect.DetectorConfig{Default: detect.AbuseRule{Threshold: -1}}); err == nil {
		t.Fatal("negative threshold accepted")
	}
	if _, err := detect.NewDetector(detect.DetectorConfig{Webhook: &detect.WebhookConfig{URL: "ftp://x"}}); err == nil {
		t.Fatal("ftp webhook accepted")
	}
}

// TestDetectorThresholdReload: a reload that changes the threshold still
// alerts at the new one for keys already being counted.
func TestDetectorThresholdReload(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	d, err := detect.NewDetector(detect.DetectorConfig{
		Default: detect.AbuseRule{Threshold: 5, Window: time.Minute},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:     func() time.Time { return clock },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	deny := func(n int) {
		for range n {
			clock = clock.Add(time.Millisecond)
			d.Observe(engine.Event{Verdict: engine.Denied, Rule: "r", Policy: "p", Key: "k"})
		}
	}
	deny(3) // counted under threshold 5
	for _, th := range []int{2, 8} {
		if err := d.SetRules(detect.AbuseRule{Threshold: th, Window: time.Minute}, nil); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(2 * time.Minute) // past the dedup window
		before := len(d.Alerts())
		deny(th)
		if got := len(d.Alerts()) - before; got != 1 {
			t.Fatalf("threshold %d: %d alerts after %d denials, want 1", th, got, th)
		}
	}
}
