package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/ops/admin"
)

// apiOnlyConfig: a daemon answering the decision API alone, with a shadow
// rule, an abuse-blocking rule and a rule whose policy gets reduced.
const apiOnlyConfig = `
api:
  listen: "127.0.0.1:0"
admin:
  listen: "127.0.0.2:0"
  token: admin-secret
log: {level: error}
policies:
  trial: {algorithm: fixed-window, quota: 1, window: 1h}
  login: {algorithm: sliding-window-log, quota: 2, window: 1h}
  api: {algorithm: sliding-window-log, quota: 10, window: 1h}
rules:
  - name: trial
    match: "/trial"
    mode: shadow
    policies: [trial]
  - name: login
    match: "POST /login"
    policies: [login]
    abuse: {threshold: 2, window: 1m, block: 1m}
  - name: api
    match: "/api/"
    policies: [api]
`

// TestAPIThroughEngine: /v1/check decides a rule as the gateway would
// (REQUIREMENTS K3, O2): a shadow rule never refuses, an abuse block and a
// capacity reduction apply, and the checks show in the per-rule metrics,
// the dashboard's data and top offenders.
func TestAPIThroughEngine(t *testing.T) {
	f := start(t, apiOnlyConfig)
	verdict := func(body string) (string, bool, bool) {
		t.Helper()
		resp, m := check(t, f, body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", body, resp.StatusCode, m)
		}
		return m["verdict"].(string), m["allowed"].(bool), m["shadow"].(bool)
	}
	for i := range 3 {
		v, ok, shadow := verdict(`{"key":"k","rule":"trial"}`)
		if v != "allowed" || !ok || !shadow {
			t.Fatalf("shadow check %d: verdict %q allowed %v shadow %v, want allowed in shadow", i+1, v, ok, shadow)
		}
	}
	for i, want := range []string{"allowed", "allowed", "denied", "denied", "blocked"} {
		if v, _, _ := verdict(`{"key":"victim","rule":"login"}`); v != want {
			t.Fatalf("login check %d: %q, want %q", i+1, v, want)
		}
	}
	ac := &admin.AdminClient{BaseURL: f.url(FaceAdmin, ""), Token: "admin-secret"}
	if _, err := ac.Reduce(context.Background(), admin.ReduceRequest{Policies: []string{"api"}, Factor: 0.5, Duration: "1m"}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		want := map[bool]string{true: "allowed", false: "reduced"}[i < 5]
		if v, _, _ := verdict(`{"key":"c","rule":"api"}`); v != want {
			t.Fatalf("api check %d at half of 10: %q, want %q", i+1, v, want)
		}
	}

	if v, _, _ := verdict(`{"key":"d","policies":["login"]}`); v != "allowed" {
		t.Fatalf("check of a policy list: %q", v)
	}

	metrics := adminGet(t, f, "/metrics")
	for _, want := range []string{
		`floodgate_decisions_total{outcome="shadow_denied",policy="trial",rule="trial"} 2`,
		`floodgate_decisions_total{outcome="allowed",policy="",rule="trial"} 1`,
		`floodgate_decisions_total{outcome="denied",policy="login",rule="login"} 2`,
		`floodgate_decisions_total{outcome="blocked",policy="",rule="login"} 1`,
		`floodgate_decisions_total{outcome="reduced",policy="api",rule="api"} 1`,
		`floodgate_abuse_alerts_total{rule="login"} 1`,
		// A caller's policy list is labelled by a fixed name, not by what it sent.
		`floodgate_decisions_total{outcome="allowed",policy="",rule="(policies)"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	var data admin.DashboardData
	if err := json.Unmarshal([]byte(adminGet(t, f, "/dashboard/data.json")), &data); err != nil {
		t.Fatal(err)
	}
	tot := data.Stats.Totals
	if tot.Allowed != 9 || tot.Shadow != 2 || tot.Limited != 2 || tot.Blocked != 1 || tot.Reduced != 1 {
		t.Errorf("dashboard totals %+v, want 9 allowed, 2 shadow, 2 limited, 1 blocked, 1 reduced", tot)
	}
	login := data.Top.Rules["login"]
	if len(login) != 1 || login[0].Key != httplimit.Fingerprint("victim") || login[0].Count != 2 {
		t.Errorf("top offenders of login %+v, want the victim key twice", login)
	}
}

func adminGet(t *testing.T, f *fixture, path string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", f.url(FaceAdmin, path), nil)
	req.Header.Set("Authorization", "Bearer admin-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}
