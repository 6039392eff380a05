package server

import (
	"fmt"
	"testing"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// TestReadinessFollowsFailureMode (REQUIREMENTS S3): with Redis down
// (nothing listens on port 1) a replica whose rules fail open or to local
// still answers as configured, so it stays ready and keeps its place in
// the Service; one that fails closed, wholly or for one rule, is not
// ready. /healthz/store says the store is down in every case.
func TestReadinessFollowsFailureMode(t *testing.T) {
	const perRule = `
api: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
log: {level: error}
store:
  type: redis
  failure_mode: fail-open
  redis: {url: "redis://127.0.0.1:1/0", timeout: 200ms}
policies:
  p: {quota: 3, window: 1h}
rules:
  - {name: login, match: "POST /login", policies: [p], failure_mode: fail-closed}
  - {name: api, match: "/", policies: [p]}
`
	for _, c := range []struct {
		name, yaml string
		ready      int
		body       string
	}{
		{"fail-open", fmt.Sprintf(redisConfig, "fail-open", "127.0.0.1:1", 0), 200, `{"status":"ready","store":"down","degraded":true}`},
		{"fail-to-local", fmt.Sprintf(redisConfig, "fail-to-local", "127.0.0.1:1", 0), 200, `{"status":"ready","store":"down","degraded":true}`},
		{"fail-closed", fmt.Sprintf(redisConfig, "fail-closed", "127.0.0.1:1", 0), 503, `{"status":"not_ready","store":"down","degraded":true,"fail_closed":"store.failure_mode"}`},
		{"one rule fail-closed", perRule, 503, `{"status":"not_ready","store":"down","degraded":true,"fail_closed":"rule login"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := start(t, c.yaml)
			resp, body := testkit.Do(t, "GET", f.url(FaceAdmin, "/readyz"), "")
			if resp.StatusCode != c.ready || body != c.body {
				t.Errorf("readyz: %d %s, want %d %s", resp.StatusCode, body, c.ready, c.body)
			}
			resp, body = testkit.Do(t, "GET", f.url(FaceAdmin, "/healthz/store"), "")
			if resp.StatusCode != 503 || body != `{"status":"down"}` {
				t.Errorf("healthz/store: %d %s", resp.StatusCode, body)
			}
		})
	}
}

// TestStoreHealthUp: with Redis up both probes say so.
func TestStoreHealthUp(t *testing.T) {
	f := start(t, fmt.Sprintf(redisConfig, "fail-closed", testkit.Env(t, "FLOODGATE_TEST_REDIS"), 0))
	if resp, body := testkit.Do(t, "GET", f.url(FaceAdmin, "/readyz"), ""); resp.StatusCode != 200 || body != `{"status":"ready","store":"up"}` {
		t.Errorf("readyz: %d %s", resp.StatusCode, body)
	}
	if resp, body := testkit.Do(t, "GET", f.url(FaceAdmin, "/healthz/store"), ""); resp.StatusCode != 200 || body != `{"status":"up"}` {
		t.Errorf("healthz/store: %d %s", resp.StatusCode, body)
	}
}
