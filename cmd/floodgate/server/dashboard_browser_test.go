package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/ops/admin"
	"github.com/floodgate/floodgate/ops/detect"
	"github.com/floodgate/floodgate/ops/reduce"
	"github.com/floodgate/floodgate/ops/stats"
	"github.com/floodgate/floodgate/ops/top"
	"github.com/floodgate/floodgate/redisstore"
)

// dashState is what the page shows, read from its DOM.
type dashState struct {
	Updates int               `json:"updates"`
	Totals  map[string]string `json:"totals"`
	// Rules maps rule → series → the sum its chart path carries; Legend the
	// numbers printed in its legend.
	Rules      map[string]map[string]float64 `json:"rules"`
	Legend     map[string]map[string]string  `json:"legend"`
	Points     map[string]int                `json:"points"`
	Retry      map[string]int                `json:"retry"`
	Top        [][]string                    `json:"top"`
	Alerts     [][]string                    `json:"alerts"`
	Reductions [][]string                    `json:"reductions"`
	Latency    map[string]string             `json:"latency"`
	LatLegend  map[string]string             `json:"latLegend"`
	LatLabels  map[string]string             `json:"latLabels"`
	LatCounts  string                        `json:"latCounts"`
	LatDashed  []string                      `json:"latDashed"`
	LatPoints  int                           `json:"latPoints"`
	NearPoints int                           `json:"nearPoints"`
	RatioPts   int                           `json:"ratioPoints"`
}

const readDashboard = `(() => {
  const q = s => document.querySelector(s), qa = (s, r) => [...(r || document).querySelectorAll(s)];
  const rules = {}, legend = {}, points = {};
  for (const fig of qa("figure[data-rule]")) {
    const r = fig.dataset.rule;
    rules[r] = {}; legend[r] = {};
    for (const p of qa("path[data-series]", fig)) { rules[r][p.dataset.series] = Number(p.dataset.sum); points[r] = Number(p.dataset.points); }
    for (const s of qa(".legend span[data-series]", fig)) legend[r][s.dataset.series] = s.querySelector("b").textContent;
  }
  const retry = {};
  for (const b of qa("#retry-chart rect")) retry[b.dataset.label] = Number(b.dataset.count);
  const rows = id => qa("#" + id + " tbody tr").map(tr => [...tr.cells].map(c => c.textContent));
  const t = id => q("#" + id).textContent;
  return {
    updates: Number(document.body.dataset.updates || 0),
    totals: { allowed: t("total-allowed"), limited: t("total-limited"), blocked: t("total-blocked"), reduced: t("total-reduced"), share: t("refused-share") },
    rules, legend, points, retry,
    top: rows("top-table"), alerts: rows("alerts-table"), reductions: rows("reductions-table"),
    latency: { p50: t("lat-p50"), p95: t("lat-p95"), p99: t("lat-p99") },
    latLegend: Object.fromEntries(qa("#latency-legend span[data-series]").map(s => [s.dataset.series, s.querySelector("b").textContent])),
    latLabels: Object.fromEntries(qa("#latency-legend span[data-series]").map(s => [s.dataset.series, s.textContent])),
    latCounts: t("latency-counts"),
    latDashed: qa("#latency-chart path.dashed").map(p => p.dataset.series),
    latPoints: Number(q("#latency-chart path[data-series=p50]").dataset.points),
    nearPoints: Number(q("#latency-chart path[data-series=cached-p50]").dataset.points),
    ratioPoints: Number(q("#ratio-chart path").dataset.points),
  };
})()`

// traffic counts the answers the test's requests got.
type traffic struct {
	allowed, limited, blocked, reduced map[string]int // by rule
	limitedBy                          map[string]int // api 429 quota-exceeded by client IP
	retry                              map[string]int // Retry-After bucket label → refusals
}

func (tr *traffic) send(t *testing.T, base, method, path, ip, rule string) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, nil)
	req.Header.Set("X-Forwarded-For", ip)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var p header.Problem
	json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	switch {
	case resp.StatusCode == 200:
		tr.allowed[rule]++
		return
	case resp.StatusCode == 429 && p.Type == header.ProblemAbnormalUsageDetected:
		tr.blocked[rule]++
		return // refused before any limit: no Retry-After bucket
	case resp.StatusCode == 503 && p.Type == header.ProblemTemporaryReducedCapacity:
		tr.reduced[rule]++
	case resp.StatusCode == 429 && p.Type == header.ProblemQuotaExceeded:
		tr.limited[rule]++
		if rule == "api" {
			tr.limitedBy[ip]++
		}
	default:
		t.Fatalf("%s %s from %s: %d %q", method, path, ip, resp.StatusCode, p.Type)
	}
	tr.retry[bucketLabel(ra)]++
}

func bucketLabel(secs int) string {
	for _, b := range []struct {
		le    int
		label string
	}{{1, "≤1s"}, {2, "≤2s"}, {5, "≤5s"}, {10, "≤10s"}, {30, "≤30s"}, {60, "≤1m"}, {300, "≤5m"}, {900, "≤15m"}, {3600, "≤1h"}} {
		if secs <= b.le {
			return b.label
		}
	}
	return ">1h"
}

// TestDashboardBrowser drives Debian's Chromium over the live dashboard:
// five minutes of traffic (on a test clock, read by a Redis store with its
// near cache on) with a capacity reduction and an abuse block, then checks
// that the charts, the totals and the top-offender table show what the
// requests got, that the latency chart's legend tells store round trips
// from near-cache answers, that the page refreshes by itself, and saves a
// screenshot.
func TestDashboardBrowser(t *testing.T) {
	chrome := testkit.Env(t, "FLOODGATE_TEST_CHROMIUM")
	if _, err := os.Stat(chrome); err != nil {
		t.Fatalf("FLOODGATE_TEST_CHROMIUM=%s: %v; scripts/services-up.sh installs Chromium", chrome, err)
	}

	clk := newTestClock()
	dash := stats.NewStats(stats.Config{Now: clk.Now})
	top := top.NewOffenders(top.OffendersConfig{Now: clk.Now})
	det, err := detect.NewDetector(detect.DetectorConfig{
		Rules:  map[string]detect.AbuseRule{"api": {Threshold: 70, Window: time.Minute, Block: 2 * time.Minute}},
		Logger: quiet,
		Now:    clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	red := reduce.NewReductions(reduce.ReductionsConfig{Store: reduce.NewMemoryReductions(clk.Now), Logger: quiet, Now: clk.Now, Refresh: time.Hour})
	defer red.Close()
	rdb := redis.NewClient(&redis.Options{Addr: testkit.Env(t, "FLOODGATE_TEST_REDIS")})
	defer rdb.Close()
	store, err := redisstore.New(rdb, redisstore.WithClock(clk.Now), redisstore.WithNearCache(1000, 10*time.Millisecond),
		redisstore.WithPrefix(fmt.Sprintf("fgdash:%d:", time.Now().UnixNano())))
	if err != nil {
		t.Fatal(err)
	}
	srv := serveBehindXFF(t, httplimit.Config{
		Engine: newEngine(t, engine.Config{Store: store, Observer: engine.Observers{det, top, dash}, Blocker: det, Capacity: red}),
		Rules: []httplimit.Rule{
			{Pattern: "/api/", Rule: engine.Rule{Name: "api", Policies: []floodgate.Policy{{Name: "api", Algorithm: floodgate.SlidingWindowLog, Quota: 100, Window: time.Hour}}}},
			{Pattern: "POST /login", Rule: engine.Rule{Name: "login", Policies: []floodgate.Policy{{Name: "login", Algorithm: floodgate.SlidingWindowLog, Quota: 5, Window: time.Minute}}}},
		},
	})
	admin := httptest.NewServer(admin.NewAdmin(admin.Config{Detector: det, Offenders: top, Stats: dash, Reductions: red}))
	defer admin.Close()

	tr := &traffic{allowed: map[string]int{}, limited: map[string]int{}, blocked: map[string]int{}, reduced: map[string]int{},
		limitedBy: map[string]int{}, retry: map[string]int{}}
	heavy := []string{"203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4", "203.0.113.5"}
	weights := []int{7, 5, 4, 3, 2}
	// 60 steps of 5 s: 8 ordinary clients once per step; five heavy
	// clients during steps 5–35; a login guesser throughout; and from
	// step 40 the api policy at 50% for 3 minutes, which the ordinary
	// clients (40 used by then) run into at step 50.
	for step := range 60 {
		if step == 40 {
			if _, err := red.Set(context.Background(), []string{"api"}, 0.5, 3*time.Minute, "load test"); err != nil {
				t.Fatal(err)
			}
		}
		for c := range 8 {
			tr.send(t, srv.URL, "GET", "/api/items", fmt.Sprintf("10.1.0.%d", c+1), "api")
		}
		if step >= 5 && step <= 35 {
			for i, ip := range heavy {
				for range weights[i] {
					tr.send(t, srv.URL, "GET", "/api/items", ip, "api")
				}
			}
		}
		for range 2 {
			tr.send(t, srv.URL, "POST", "/login", "198.51.100.9", "login")
		}
		clk.Advance(5 * time.Second)
	}
	clk.Advance(-5 * time.Second) // stay in the last step with traffic
	if tr.blocked["api"] == 0 || tr.reduced["api"] == 0 || tr.limited["api"] == 0 {
		t.Fatalf("the traffic did not produce every kind of answer: %+v", tr)
	}
	t.Logf("traffic: allowed %v, limited %v, blocked %v, reduced %v", tr.allowed, tr.limited, tr.blocked, tr.reduced)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.WindowSize(1400, 1000),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	// The first action starts the browser; it must not carry the timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate(admin.URL+"/dashboard/?refresh=300")); err != nil {
		t.Fatalf("starting %s: %v", chrome, err)
	}
	tctx, tcancel := context.WithTimeout(ctx, 40*time.Second)
	defer tcancel()
	if _, err := chromedp.Run(tctx, chromedp.Poll[bool](`Number(document.body.dataset.updates || 0) >= 1`, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("the page never loaded its data: %v", err)
	}
	st, err := chromedp.Run(tctx, chromedp.Evaluate[dashState](readDashboard))
	if err != nil {
		t.Fatal(err)
	}

	num := func(s string) int {
		v, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
		if err != nil {
			t.Fatalf("not a number on the page: %q", s)
		}
		return v
	}
	sumOf := func(m map[string]int) (n int) {
		for _, v := range m {
			n += v
		}
		return n
	}
	// Totals cards.
	if num(st.Totals["allowed"]) != sumOf(tr.allowed) || num(st.Totals["limited"]) != sumOf(tr.limited) ||
		num(st.Totals["blocked"]) != sumOf(tr.blocked) || num(st.Totals["reduced"]) != sumOf(tr.reduced) {
		t.Fatalf("totals on the page %v, requests got allowed %v limited %v blocked %v reduced %v",
			st.Totals, tr.allowed, tr.limited, tr.blocked, tr.reduced)
	}
	all := sumOf(tr.allowed) + sumOf(tr.limited) + sumOf(tr.blocked) + sumOf(tr.reduced)
	refused := all - sumOf(tr.allowed)
	if want := fmt.Sprintf("%.1f%%", 100*float64(refused)/float64(all)); st.Totals["share"] != want {
		t.Fatalf("refused share %q, want %q", st.Totals["share"], want)
	}
	// Per-rule charts: each series' path sums to what the requests got,
	// and the legend prints the same numbers.
	for _, rule := range []string{"api", "login"} {
		for series, want := range map[string]int{"allowed": tr.allowed[rule], "limited": tr.limited[rule], "blocked": tr.blocked[rule], "reduced": tr.reduced[rule]} {
			if got := st.Rules[rule][series]; got != float64(want) {
				t.Fatalf("rule %s chart %s sums to %v, want %d", rule, series, got, want)
			}
			if got := num(st.Legend[rule][series]); got != want {
				t.Fatalf("rule %s legend %s = %d, want %d", rule, series, got, want)
			}
		}
		if st.Points[rule] != 120 {
			t.Fatalf("rule %s chart has %d points, want 120 (10 min of 5 s steps)", rule, st.Points[rule])
		}
	}
	// The ratio chart has a point per step with traffic; the latency
	// lines one per step with a store round trip, or with a near-cache
	// answer: from step 50, the reduction refuses the ordinary clients
	// too, and the near cache answers every request of some steps.
	snap := dash.Snapshot()
	steps := func(ls stats.LatencySeries) (n int) {
		for _, q := range ls.Steps {
			if q.N > 0 {
				n++
			}
		}
		return n
	}
	if st.RatioPts != 60 || st.LatPoints != steps(snap.Latency) || st.NearPoints != steps(snap.CachedLatency) || st.LatPoints < 40 {
		t.Fatalf("ratio chart %d points, want 60; latency chart %d store and %d near-cache points, want %d and %d",
			st.RatioPts, st.LatPoints, st.NearPoints, steps(snap.Latency), steps(snap.CachedLatency))
	}
	for _, k := range []string{"p50", "p95", "p99"} {
		if !strings.HasSuffix(st.Latency[k], " ms") {
			t.Fatalf("latency %s shows %q", k, st.Latency[k])
		}
		// The chart's legend names each line with its quantile.
		if st.LatLegend[k] != st.Latency[k] || st.LatLabels[k] != "store "+k+" "+st.Latency[k] {
			t.Fatalf("latency legend %s = %q (%q), the card says %q", k, st.LatLegend[k], st.LatLabels[k], st.Latency[k])
		}
	}
	// The near cache's answers are lines of their own, dashed, named so.
	for _, k := range []string{"p50", "p99"} {
		if v := st.LatLegend["cached-"+k]; !strings.HasSuffix(v, " ms") || st.LatLabels["cached-"+k] != "near cache "+k+" "+v {
			t.Fatalf("latency legend cached-%s = %q (%q)", k, v, st.LatLabels["cached-"+k])
		}
	}
	if strings.Join(st.LatDashed, ",") != "cached-p50,cached-p99" {
		t.Fatalf("dashed latency lines %v, want the near cache's", st.LatDashed)
	}
	// Every decision a limit made (blocks are refused before any) was
	// timed once: by a Redis round trip, or, for a refusal repeated
	// within its Retry-After, by the near cache.
	var trips, near int
	if _, err := fmt.Sscanf(strings.ReplaceAll(st.LatCounts, ",", ""), "%d store round trips · %d near-cache answers", &trips, &near); err != nil {
		t.Fatalf("latency counts %q: %v", st.LatCounts, err)
	}
	refusals := sumOf(tr.limited) + sumOf(tr.reduced)
	if decided := all - sumOf(tr.blocked); trips+near != decided || near == 0 || near >= refusals ||
		trips != int(snap.Latency.Overall.N) || near != int(snap.CachedLatency.Overall.N) {
		t.Fatalf("latency counts %q, want %d decisions in all, some of the %d refusals from the near cache (data: %d and %d)",
			st.LatCounts, decided, refusals, snap.Latency.Overall.N, snap.CachedLatency.Overall.N)
	}
	// Retry-After bars: blocks are refused before any limit, so only
	// limited and reduced answers have a bucket.
	for label, want := range tr.retry {
		if st.Retry[label] != want {
			t.Fatalf("Retry-After bar %s = %d, want %d (all bars %v)", label, st.Retry[label], want, st.Retry)
		}
	}
	// Top limited keys of api: the heavy clients by their 429 count,
	// heaviest first, as fingerprints, exact (fewer keys than counters).
	var apiRows [][]string
	for _, row := range st.Top {
		if row[0] == "api" {
			apiRows = append(apiRows, row)
		}
	}
	if len(apiRows) == 0 {
		t.Fatal("no api rows in the top-offender table")
	}
	for i, row := range apiRows {
		var ip string
		for cand := range tr.limitedBy {
			if httplimit.Fingerprint(cand) == row[2] {
				ip = cand
			}
		}
		if ip == "" || num(row[3]) != tr.limitedBy[ip] || row[4] != "0" || row[1] != strconv.Itoa(i+1) {
			t.Fatalf("top row %d %v; limited by IP %v", i, row, tr.limitedBy)
		}
		if i > 0 && num(row[3]) > num(apiRows[i-1][3]) {
			t.Fatalf("top table not sorted: %v", apiRows)
		}
	}
	if apiRows[0][2] != httplimit.Fingerprint(heavy[0]) {
		t.Fatalf("heaviest offender %s, want %s's fingerprint", apiRows[0][2], heavy[0])
	}
	// The heaviest client crossed 70 limited requests in a minute (7 per
	// 5 s step): one alert, listed with its block; the next heaviest (5
	// per step, at most 60 a minute) never did.
	if len(st.Alerts) != 1 || st.Alerts[0][1] != "api" || st.Alerts[0][2] != httplimit.Fingerprint(heavy[0]) ||
		st.Alerts[0][3] != "70 / 60 s" || st.Alerts[0][4] == "—" {
		t.Fatalf("alerts table %v", st.Alerts)
	}
	if tr.limitedBy[heavy[0]] != 70 || tr.limitedBy[heavy[1]] != 55 {
		t.Fatalf("limited by IP %v, want 70 for %s and 55 for %s", tr.limitedBy, heavy[0], heavy[1])
	}
	if len(st.Reductions) != 1 || st.Reductions[0][0] != "api" || st.Reductions[0][1] != "50%" || st.Reductions[0][3] != "load test" {
		t.Fatalf("reductions table %v", st.Reductions)
	}

	// It refreshes by itself: new traffic shows up without a reload.
	before := num(st.Totals["allowed"])
	for i := range 3 {
		tr.send(t, srv.URL, "GET", "/api/items", fmt.Sprintf("10.2.0.%d", i+1), "api")
	}
	want := strconv.Itoa(before + 3)
	if _, err := chromedp.Run(tctx, chromedp.Poll[bool](
		`document.getElementById("total-allowed").textContent.replaceAll(",", "") === "`+want+`"`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the page did not show the new total %s by itself: %v", want, err)
	}

	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
	// FLOODGATE_DASHBOARD_PNG=docs/dashboard.png refreshes the docs' copy.
	if dst := os.Getenv("FLOODGATE_DASHBOARD_PNG"); dst != "" {
		if err := os.WriteFile(dst, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
