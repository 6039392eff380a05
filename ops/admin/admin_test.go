package admin_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/opstest"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/ops/admin"
	"github.com/floodgate/floodgate/ops/detect"
	"github.com/floodgate/floodgate/ops/reduce"
	"github.com/floodgate/floodgate/ops/stats"
	"github.com/floodgate/floodgate/ops/top"
)

// TestAdminRoutes: the read routes answer JSON with real values, the
// dashboard's files come from the binary and load nothing from elsewhere.
func TestAdminRoutes(t *testing.T) {
	clk := opstest.NewClock()
	stats := stats.NewStats(stats.Config{Now: clk.Now})
	offenders := top.NewOffenders(top.OffendersConfig{Now: clk.Now})
	det, _ := detect.NewDetector(detect.DetectorConfig{Default: detect.AbuseRule{Threshold: 3, Block: time.Minute}, Logger: opstest.Quiet, Now: clk.Now})
	red := reduce.NewReductions(reduce.ReductionsConfig{Logger: opstest.Quiet, Now: clk.Now})
	defer red.Close()
	obs := engine.Observers{det, offenders, stats, nil}
	for range 3 {
		obs.Observe(engine.Event{Verdict: engine.Denied, Rule: "api", Policy: "p", Key: "192.0.2.1", RetryAfter: time.Second})
	}
	obs.Observe(engine.Event{Verdict: engine.Denied, Rule: "api", Policy: "p", Key: "192.0.2.2", RetryAfter: time.Second})
	obs.Observe(engine.Event{Rule: "api", Key: "192.0.2.3", Verdict: engine.Allowed})
	if _, err := red.Set(context.Background(), []string{"api"}, 0.5, time.Minute, "drill"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.NewAdmin(admin.Config{Detector: det, Offenders: offenders, Stats: stats, Reductions: red}))
	defer srv.Close()

	resp, body := testkit.Do(t, "GET", srv.URL+"/v1/admin/top?rule=api&n=1", "")
	var tr admin.TopResponse
	if err := json.Unmarshal([]byte(body), &tr); err != nil || resp.StatusCode != 200 {
		t.Fatalf("top: %d %s", resp.StatusCode, body)
	}
	if tr.Keys != "fingerprint" || len(tr.Rules["api"]) != 1 || tr.Rules["api"][0] != (top.Entry{Key: httplimit.Fingerprint("192.0.2.1"), Count: 3}) {
		t.Fatalf("top: %+v", tr)
	}
	if resp, _ := testkit.Do(t, "GET", srv.URL+"/v1/admin/top?n=0", ""); resp.StatusCode != 400 {
		t.Fatalf("top?n=0: %d", resp.StatusCode)
	}

	_, body = testkit.Do(t, "GET", srv.URL+"/v1/admin/alerts", "")
	var ar admin.AlertsResponse
	json.Unmarshal([]byte(body), &ar)
	if len(ar.Alerts) != 1 || ar.Alerts[0].Key != httplimit.Fingerprint("192.0.2.1") || len(ar.Blocks) != 1 ||
		!ar.Blocks[0].Until.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("alerts: %s", body)
	}

	_, body = testkit.Do(t, "GET", srv.URL+"/v1/admin/reductions", "")
	if !strings.Contains(body, `"policy":"api","factor":0.5`) || !strings.Contains(body, `"reason":"drill"`) {
		t.Fatalf("reductions: %s", body)
	}

	resp, body = testkit.Do(t, "GET", srv.URL+"/dashboard/data.json", "")
	var d admin.DashboardData
	if err := json.Unmarshal([]byte(body), &d); err != nil || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("data.json: %v %s", err, body)
	}
	if d.Stats.Totals.Limited != 4 || d.Stats.Totals.Allowed != 1 || len(d.Top.Rules["api"]) != 2 || len(d.Reductions) != 1 || len(d.Alerts.Alerts) != 1 {
		t.Fatalf("data.json: %s", body)
	}

	if resp, _ := testkit.Do(t, "GET", srv.URL+"/dashboard", ""); resp.StatusCode != 301 || resp.Header.Get("Location") != "/dashboard/" {
		t.Fatalf("/dashboard: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, page := testkit.Do(t, "GET", srv.URL+"/dashboard/", "")
	if resp.StatusCode != 200 || !strings.Contains(page, `<script src="app.js"></script>`) ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Fatalf("/dashboard/: %d %v", resp.StatusCode, resp.Header)
	}
	// Nothing on the page points outside the admin listener: the only
	// absolute URL is the SVG namespace, an identifier, never fetched.
	abs := regexp.MustCompile(`https?://[^\s"'<>)]+`)
	for _, f := range []string{"/dashboard/", "/dashboard/app.js", "/dashboard/style.css"} {
		resp, text := testkit.Do(t, "GET", srv.URL+f, "")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", f, resp.StatusCode)
		}
		for _, u := range abs.FindAllString(text, -1) {
			if u != "http://www.w3.org/2000/svg" {
				t.Fatalf("%s refers to %s", f, u)
			}
		}
	}

	// The reduction gauge.
	if n := testutil.CollectAndCount(red, "floodgate_capacity_factor"); n != 1 {
		t.Fatalf("%d floodgate_capacity_factor series", n)
	}
	clk.Advance(time.Minute)
	if n := testutil.CollectAndCount(red, "floodgate_capacity_factor"); n != 0 {
		t.Fatalf("%d floodgate_capacity_factor series after the end", n)
	}

	// Parts left out answer 404.
	empty := httptest.NewServer(admin.NewAdmin(admin.Config{}))
	defer empty.Close()
	for _, p := range []string{"/v1/admin/top", "/v1/admin/alerts", "/v1/admin/reductions"} {
		if resp, _ := testkit.Do(t, "GET", empty.URL+p, ""); resp.StatusCode != 404 {
			t.Fatalf("%s without its part: %d", p, resp.StatusCode)
		}
	}
}
