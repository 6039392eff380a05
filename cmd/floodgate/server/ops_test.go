package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/ops/admin"
	"github.com/floodgate/floodgate/ops/detect"
)

// opsTestConfig: rule "login" keyed by IP and route, counting abuse by IP
// only (3 limited within a minute), blocking 1m; the upstream (first %q)
// and a webhook (second).
const opsTestConfig = `
gateway:
  listen: "127.0.0.1:0"
  upstream: %q
admin:
  # Another address than the gateway's, so the two get their own listeners.
  listen: "127.0.0.2:0"
  token: admin-secret
trusted_proxies: ["127.0.0.0/8"]
log: {level: error}
policies:
  login: {algorithm: sliding-window-log, quota: 2, window: 1h}
  api: {algorithm: sliding-window-log, quota: 10, window: 1h}
rules:
  - name: login
    match: "POST /login"
    key: "{ip}|{route}"
    policies: [login]
    abuse: {threshold: 3, window: 1m, block: 1m, key: "{ip}"}
  - name: api
    match: "/api/"
    policies: [api]
ops:
  webhook: {url: %q, timeout: 1s}
`

// TestServerOps runs the daemon with the operations features: abuse is
// detected and blocked per the rule's abuse section and reported to the
// webhook, reductions go through the admin API with the admin token, and
// the dashboard, top offenders and metrics are on the admin listener.
func TestServerOps(t *testing.T) {
	var mu sync.Mutex
	var alerts []detect.Alert
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a detect.Alert
		json.NewDecoder(r.Body).Decode(&a)
		mu.Lock()
		alerts = append(alerts, a)
		mu.Unlock()
	}))
	defer hook.Close()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer app.Close()
	cfg, err := config.Parse("ops.yaml", []byte(fmt.Sprintf(opsTestConfig, app.URL, hook.URL)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	gw := "http://" + srv.Addr(FaceGateway)
	adminURL := "http://" + srv.Addr(FaceAdmin)

	send := func(method, path, ip string) (int, string) {
		req, _ := http.NewRequest(method, gw+path, nil)
		req.Header.Set("X-Forwarded-For", ip)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p header.Problem
		json.NewDecoder(resp.Body).Decode(&p)
		return resp.StatusCode, p.Type
	}
	// 2 logins pass, 3 are limited: the 3rd limited one is abuse; then the
	// IP is blocked.
	for i := range 5 {
		code, typ := send("POST", "/login", "192.0.2.50")
		if want := map[bool]int{true: 200, false: 429}[i < 2]; code != want || (i >= 2 && typ != header.ProblemQuotaExceeded) {
			t.Fatalf("login %d: %d %q", i+1, code, typ)
		}
	}
	if code, typ := send("POST", "/login", "192.0.2.50"); code != 429 || typ != header.ProblemAbnormalUsageDetected {
		t.Fatalf("after the alert: %d %q, want 429 abnormal-usage-detected", code, typ)
	}
	var got []detect.Alert
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		got = append([]detect.Alert(nil), alerts...)
		mu.Unlock()
		if len(got) > 0 {
			break
		}
	}
	if len(got) != 1 || got[0].Rule != "login" || got[0].Key != httplimit.Fingerprint("192.0.2.50") || got[0].Count != 3 {
		t.Fatalf("webhook alerts %+v", got)
	}

	// Reduce api to 50% through the admin API: the token is required.
	anon := &admin.AdminClient{BaseURL: adminURL}
	if _, err := anon.Reduce(context.Background(), admin.ReduceRequest{Policies: []string{"api"}, Factor: 0.5, Duration: "1m"}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("reduce without the token: %v", err)
	}
	ac := &admin.AdminClient{BaseURL: adminURL, Token: "admin-secret"}
	if _, err := ac.Reduce(context.Background(), admin.ReduceRequest{Policies: []string{"nope"}, Factor: 0.5, Duration: "1m"}); err == nil || !strings.Contains(err.Error(), `unknown policy "nope" (defined: api, login)`) {
		t.Fatalf("reduce of an unknown policy: %v", err)
	}
	if _, err := ac.Reduce(context.Background(), admin.ReduceRequest{Policies: []string{"api"}, Factor: 0.5, Duration: "1m"}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if code, _ := send("GET", "/api/x", "192.0.2.60"); code != 200 {
			t.Fatalf("api %d under the reduction: %d", i+1, code)
		}
	}
	if code, typ := send("GET", "/api/x", "192.0.2.60"); code != 503 || typ != header.ProblemTemporaryReducedCapacity {
		t.Fatalf("6th api request at 50%% of 10: %d %q", code, typ)
	}
	if left, err := ac.EndReduce(context.Background(), nil); err != nil || len(left) != 0 {
		t.Fatalf("end: %v %v", left, err)
	}

	top, err := ac.Top(context.Background(), "login", 5)
	if err != nil || len(top.Rules["login"]) != 1 || top.Rules["login"][0].Count != 3 {
		t.Fatalf("top: %+v %v", top, err)
	}
	// The dashboard is behind the token too; a browser gives it as the
	// password of Basic authentication.
	if resp, err := http.Get(adminURL + "/dashboard/"); err != nil || resp.StatusCode != 401 {
		t.Fatalf("dashboard without the token: %v %v", resp, err)
	}
	dash, _ := http.NewRequest("GET", adminURL+"/dashboard/", nil)
	dash.SetBasicAuth("", "admin-secret")
	resp, err := http.DefaultClient.Do(dash)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("dashboard: %v %v", resp, err)
	}
	resp.Body.Close()
	req, _ := http.NewRequest("GET", adminURL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer admin-secret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`floodgate_abuse_alerts_total{rule="login"} 1`, `floodgate_abuse_blocked_total{rule="login"} 1`,
		`floodgate_top_offender_requests{key="` + httplimit.Fingerprint("192.0.2.50|POST /login") + `",rank="1",rule="login"} 3`,
		`floodgate_abuse_webhook_total{outcome="sent"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("metrics lack %s:\n%s", want, body)
		}
	}
}
