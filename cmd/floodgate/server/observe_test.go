package server

import (
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

func scrape(t *testing.T, f *fixture) string {
	t.Helper()
	resp, body := testkit.Do(t, "GET", f.url(FaceAdmin, "/metrics"), "", "Authorization", "Bearer admin-secret")
	if resp.StatusCode != 200 {
		t.Fatalf("metrics: %d", resp.StatusCode)
	}
	return body
}

// TestEverySeriesFromStart: before any request, /metrics holds every
// metric docs/DEPLOY.md's "Observing" table lists, the configured rules'
// decision series at zero, and floodgate_build_info.
func TestEverySeriesFromStart(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/DEPLOY.md")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile("(?m)^\\| `(floodgate_[a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1)
	if len(names) < 14 {
		t.Fatalf("%d metrics in DEPLOY.md's table", len(names))
	}
	body := scrape(t, start(t, baseConfig))
	for _, n := range names {
		if !regexp.MustCompile("(?m)^" + n[1] + "(_bucket|_count)?[{ ]").MatchString(body) {
			t.Errorf("%s is documented but absent from a fresh /metrics", n[1])
		}
	}
	for _, want := range []string{
		`floodgate_decisions_total{outcome="allowed",policy="",rule="login"} 0`,
		`floodgate_decisions_total{outcome="denied",policy="api",rule="api"} 0`,
		`floodgate_store_errors_total{rule="tenant"} 0`,
		`floodgate_forward_auth_total{outcome="unavailable"} 0`,
		`floodgate_config_reloads_total{result="error"} 0`,
		`floodgate_upstream_errors_total{kind="timeout"} 0`,
		`floodgate_build_info{goversion="go`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("a fresh /metrics lacks %s", want)
		}
	}
}

// TestGatewayRED: gateway requests are counted by rule and status (the
// upstream's 200s, Floodgate's 429) and timed per rule; with log.access
// each gets an INFO record without the query or the client's address.
func TestGatewayRED(t *testing.T) {
	var buf testkit.Buffer
	f := start(t, strings.Replace(baseConfig, "log: {level: error}", "log: {level: info, access: true, format: json}", 1),
		WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	for range 4 {
		testkit.Do(t, "POST", f.url(FaceGateway, "/login?token=s3cret"), "")
	}
	testkit.Do(t, "GET", f.url(FaceGateway, "/other"), "")
	body := scrape(t, f)
	for _, want := range []string{
		`floodgate_gateway_requests_total{code="200",rule="login"} 3`,
		`floodgate_gateway_requests_total{code="429",rule="login"} 1`,
		`floodgate_gateway_requests_total{code="200",rule=""} 1`,
		`floodgate_gateway_request_duration_seconds_count{rule="login"} 4`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	var log string
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, `"msg":"request"`) {
			log += line + "\n"
		}
	}
	if n := strings.Count(log, `"msg":"request","method":"POST","path":"/login","status":`); n != 4 || strings.Contains(log, "s3cret") || strings.Contains(log, "127.0.0.1") {
		t.Errorf("access log: %d login records (want 4), no query, no address:\n%s", n, log)
	}
	if !strings.Contains(log, `"status":429,`) {
		t.Errorf("access log lacks the 429:\n%s", log)
	}
}
