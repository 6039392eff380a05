package server

import (
	"fmt"
	"testing"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// TestForwardAuthStoreDown: with the store down (nothing listens on port
// 1), forward-auth answers what the proxy passes on, never a 500: under
// fail-open 200 marked Floodgate-Degraded; under fail-closed 503 with
// Retry-After and RateLimit-Policy, or 401 in nginx mode, the one
// refusal besides 403 that auth_request passes on (examples/nginx maps it
// back to 503).
func TestForwardAuthStoreDown(t *testing.T) {
	const yaml = `
forward_auth: {listen: "127.0.0.1:0"}
admin: {listen: "off"}
trusted_proxies: ["127.0.0.1"]
log: {level: error}
store:
  type: redis
  failure_mode: %s
  redis: {url: "redis://127.0.0.1:1/0", timeout: 200ms}
policies:
  api: {quota: 3, window: 1m}
rules:
  - {name: api, match: "/", policies: [api]}
`
	for _, c := range []struct {
		mode, path string
		status     int
		retry      bool
	}{
		{"fail-open", "/v1/auth", 200, false},
		{"fail-open", "/v1/auth/nginx", 200, false},
		{"fail-closed", "/v1/auth", 503, true},
		{"fail-closed", "/v1/auth/nginx", 401, true},
	} {
		f := start(t, fmt.Sprintf(yaml, c.mode))
		resp, body := testkit.Do(t, "GET", f.url(FaceForwardAuth, c.path), "", "X-Original-URI", "/x", "X-Original-Method", "GET")
		if resp.StatusCode != c.status || resp.Header.Get("Floodgate-Degraded") != "store-unavailable" ||
			resp.Header.Get("Ratelimit-Policy") != `"api";q=3;w=60` || (resp.Header.Get("Retry-After") != "") != c.retry {
			t.Errorf("%s %s: %d %v %s", c.mode, c.path, resp.StatusCode, resp.Header, body)
		}
	}
}
