package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/ops/admin"
)

const redisConfig = `
api: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
log: {level: error}
store:
  type: redis
  failure_mode: %s
  redis: {url: "redis://%s/0", timeout: 200ms, prefix: "fgtest:%d:"}
policies:
  api: {algorithm: gcra, quota: 3, window: 1h}
rules:
  - {name: api, match: "/", policies: [api]}
`

func TestRedisStoreThroughAPI(t *testing.T) {
	f := start(t, fmt.Sprintf(redisConfig, "fail-closed", testkit.Env(t, "FLOODGATE_TEST_REDIS"), time.Now().UnixNano()))
	for i := 2; i >= 0; i-- {
		_, m := check(t, f, `{"key":"r1","rule":"api"}`)
		if m["allowed"] != true || m["remaining"] != float64(i) {
			t.Fatalf("check: %v", m)
		}
	}
	resp, m := check(t, f, `{"key":"r1","rule":"api"}`)
	if m["allowed"] != false || resp.Header.Get("Retry-After") == "" {
		t.Errorf("4th: %v", m)
	}
	if resp, _ := testkit.Do(t, "GET", f.url(FaceAdmin, "/readyz"), ""); resp.StatusCode != 200 {
		t.Errorf("readyz: %d", resp.StatusCode)
	}
}

func TestRedisDown(t *testing.T) {
	// Nothing listens on port 1: the daemon still starts and each rule
	// answers by its failure mode (readiness: probes_test.go).
	f := start(t, fmt.Sprintf(redisConfig, "fail-open", "127.0.0.1:1", 0))
	_, m := check(t, f, `{"key":"r","rule":"api"}`)
	if m["allowed"] != true || m["degraded"] != true {
		t.Errorf("fail-open check: %v", m)
	}
	f = start(t, fmt.Sprintf(redisConfig, "fail-closed", "127.0.0.1:1", 0))
	resp, body := testkit.Do(t, "POST", f.url(FaceAPI, "/v1/check"), `{"key":"r","rule":"api"}`)
	if resp.StatusCode != 503 || !strings.Contains(body, "fail-closed") {
		t.Errorf("fail-closed check: %d %s", resp.StatusCode, body)
	}
}

// TestLatencySeriesApart: with Redis and the near cache on (its default),
// store round trips and the near cache's answers are timed apart, in
// /metrics and in the dashboard's data: 3 admitted and the first denial go
// to Redis, the next 6 denials are answered from the near cache.
func TestLatencySeriesApart(t *testing.T) {
	f := start(t, fmt.Sprintf(redisConfig, "fail-closed", testkit.Env(t, "FLOODGATE_TEST_REDIS"), time.Now().UnixNano()))
	for i := range 10 {
		_, m := check(t, f, `{"key":"near","rule":"api"}`)
		if m["allowed"] != (i < 3) {
			t.Fatalf("check %d: %v", i+1, m)
		}
	}
	body := scrape(t, f)
	for _, want := range []string{
		`floodgate_store_duration_seconds_count{rule="api"} 4`,
		`floodgate_near_cache_duration_seconds_count{rule="api"} 6`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	var data admin.DashboardData
	if err := json.Unmarshal([]byte(adminGet(t, f, "/dashboard/data.json")), &data); err != nil {
		t.Fatal(err)
	}
	store, cached := data.Stats.Latency.Overall, data.Stats.CachedLatency.Overall
	if store.N != 4 || cached.N != 6 || store.P50 == nil || cached.P50 == nil {
		t.Fatalf("dashboard latency: store %+v, near cache %+v; want 4 and 6 samples", store, cached)
	}
}
