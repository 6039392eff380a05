package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// failClosed turns examples/nginx/floodgate.conf's @floodgate_down, or
// examples/caddy/Caddyfile's handle_errors, from fail-open to fail-closed
// as their comments say: the fail-open lines deleted, the fail-closed
// ones uncommented.
func failClosed(site string) string {
	open := regexp.MustCompile(`(?s)# fail-open: the app answers, unlimited\.\n.*?# fail-closed: [^\n]*\n`)
	if !open.MatchString(site) {
		panic("the example lost its fail-open and fail-closed markers")
	}
	site = open.ReplaceAllString(site, "")
	return regexp.MustCompile(`(?m)^(\s*)#((add_header|default_type|return|header|respond) )`).ReplaceAllString(site, "$1$2")
}

// storeDownConfig is a forward-auth Floodgate (%[1]q: its address) whose
// Redis is down (nothing listens on port 1), failing by %[2]s.
const storeDownConfig = `
forward_auth: {listen: %q}
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

// TestNginxFailureModes runs examples/nginx/floodgate.conf in a real
// nginx with Floodgate not running (its port closed) and with Floodgate
// running but its store down (nothing on port 1): the client gets what
// the chosen failure mode says, never nginx's bare 500. Fail-open at the
// proxy lets the app answer, marked Floodgate-Degraded; fail-closed is a
// 503 with Retry-After; Floodgate's own failure mode, with its store
// down, comes through as a 200 or a 503 with its fields.
func TestNginxFailureModes(t *testing.T) {
	nginx := service(t, "FLOODGATE_TEST_NGINX", "nginx")
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "app saw %s %s", r.Method, r.URL.Path)
	}))
	defer app.Close()
	appAddr := strings.TrimPrefix(app.URL, "http://")
	storeDown := func(mode string) string {
		auth := freePort(t)
		startDaemon(t, fmt.Sprintf(storeDownConfig, auth, mode), auth)
		return auth
	}
	for _, c := range []struct {
		name     string
		auth     func() string
		edit     func(string) string
		status   int
		degraded string
		retry    string
	}{
		{"Floodgate down, fail-open", func() string { return freePort(t) }, nil, 200, "floodgate-unreachable", ""},
		{"Floodgate down, fail-closed", func() string { return freePort(t) }, failClosed, 503, "floodgate-unreachable", "5"},
		{"store down, Floodgate fail-open", func() string { return storeDown("fail-open") }, nil, 200, "store-unavailable", ""},
		{"store down, Floodgate fail-closed", func() string { return storeDown("fail-closed") }, failClosed, 503, "store-unavailable", "1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr, dir := startNginx(t, nginx, c.auth(), appAddr, c.edit)
			resp, body := testkit.Do(t, "POST", "http://"+addr+"/api/items", "")
			if resp.StatusCode != c.status || resp.Header.Get("Floodgate-Degraded") != c.degraded || resp.Header.Get("Retry-After") != c.retry {
				t.Fatalf("%d %v %q; nginx error log:\n%s", resp.StatusCode, resp.Header, body, readFile(dir, "error.log"))
			}
			checkFailureBody(t, resp, body, "app saw POST /api/items")
			if c.degraded == "store-unavailable" && resp.Header.Get("Ratelimit-Policy") != `"api";q=3;w=60` {
				t.Errorf("RateLimit-Policy %q", resp.Header.Get("Ratelimit-Policy"))
			}
		})
	}
}

// checkFailureBody checks what a proxy's failure mode passed on: a 200 is
// the app's answer, app; a 503 is Floodgate's problem+json.
func checkFailureBody(t *testing.T, resp *http.Response, body, app string) {
	t.Helper()
	switch resp.StatusCode {
	case 200:
		if body != app {
			t.Errorf("body %q, want the app's %q", body, app)
		}
	case 503:
		if resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(body, `"status":503`) {
			t.Errorf("503: %v %q", resp.Header, body)
		}
	}
}
