package admin_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/internal/opstest"
	"github.com/floodgate/floodgate/metrics"
	"github.com/floodgate/floodgate/ops/detect"
	"github.com/floodgate/floodgate/ops/reduce"
	"github.com/floodgate/floodgate/ops/top"
)

// TestGrafanaDashboard: examples/grafana/floodgate.json is valid JSON and
// every metric its queries use is one Floodgate exports.
func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile("../../examples/grafana/floodgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg); err != nil {
		t.Fatal(err)
	}
	det, err := detect.NewDetector(detect.DetectorConfig{Registerer: reg, Webhook: &detect.WebhookConfig{URL: "http://127.0.0.1:1/"}, Logger: opstest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer det.Close(t.Context())
	red := reduce.NewReductions(reduce.ReductionsConfig{Logger: opstest.Quiet})
	defer red.Close()
	reg.MustRegister(top.NewOffenders(top.OffendersConfig{}), red)
	known := map[string]bool{}
	// Vectors without series and scrape-time collectors gather nothing,
	// so names come from the collectors' descriptions.
	descs := make(chan *prometheus.Desc, 100)
	go func() {
		for _, c := range []prometheus.Collector{top.NewOffenders(top.OffendersConfig{}), red} {
			c.Describe(descs)
		}
		close(descs)
	}()
	name := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range descs {
		if m := name.FindStringSubmatch(d.String()); m != nil {
			known[m[1]] = true
		}
	}
	// The vectors registered above: registering the name again fails
	// exactly when it is taken.
	for _, n := range []string{"floodgate_decisions_total", "floodgate_store_duration_seconds", "floodgate_near_cache_duration_seconds", "floodgate_store_errors_total",
		"floodgate_retry_after_seconds", "floodgate_abuse_alerts_total", "floodgate_abuse_blocked_total", "floodgate_abuse_webhook_total"} {
		if err := reg.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: n, Help: "probe"})); err == nil {
			t.Fatalf("%s is not registered by Floodgate", n)
		}
		known[n] = true
	}
	metric := regexp.MustCompile(`floodgate_[a-z_]+`)
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range metric.FindAllString(tg.Expr, -1) {
				base := strings.TrimSuffix(m, "_bucket")
				if !known[base] {
					t.Errorf("panel %q uses %s, which Floodgate does not export", p.Title, m)
				}
				n++
			}
		}
	}
	if len(dash.Panels) < 8 || n < 10 {
		t.Fatalf("%d panels, %d metric uses", len(dash.Panels), n)
	}
}
