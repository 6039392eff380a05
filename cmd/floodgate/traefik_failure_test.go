package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// TestTraefikFailureModes runs examples/traefik's configuration in a real
// Traefik (built from its module by scripts/traefik-build.sh) with
// Floodgate limiting, not running, and running with its store down. A
// limit's 429 reaches the client with its fields. Traefik's ForwardAuth
// has no fallback: with Floodgate not running it answers 500, with no
// body, and the app is never asked, so the only failure mode at the proxy
// is closed. With its store down, Floodgate's fail-open 200 lets the
// request through (the app sees Floodgate-Degraded) and its fail-closed
// 503 reaches the client as Floodgate wrote it.
func TestTraefikFailureModes(t *testing.T) {
	traefik := service(t, "FLOODGATE_TEST_TRAEFIK", "traefik")
	var hits atomic.Int64
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintf(w, "app saw %s %s degraded=%q", r.Method, r.URL.Path, r.Header.Get("Floodgate-Degraded"))
	}))
	defer app.Close()
	for _, c := range []struct {
		name     string
		config   string // Floodgate's, with %[1]q its address and %[2]s its failure mode; "" for not running
		mode     string
		status   int
		degraded string
		retry    string
		body     string
	}{
		{"Floodgate down", "", "", 500, "", "", ""},
		{"store down, Floodgate fail-open", storeDownConfig, "fail-open", 200, "", "", `app saw POST /api/items degraded="store-unavailable"`},
		{"store down, Floodgate fail-closed", storeDownConfig, "fail-closed", 503, "store-unavailable", "1", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			auth := freePort(t)
			if c.config != "" {
				startDaemon(t, fmt.Sprintf(c.config, auth, c.mode), auth)
			}
			before := hits.Load()
			addr, log := startTraefik(t, traefik, auth, app.URL)
			resp, body := testkit.Do(t, "POST", "http://"+addr+"/api/items", "")
			if resp.StatusCode != c.status || resp.Header.Get("Floodgate-Degraded") != c.degraded || resp.Header.Get("Retry-After") != c.retry {
				t.Fatalf("%d %v %q; traefik log:\n%s", resp.StatusCode, resp.Header, body, log)
			}
			switch c.status {
			case 500:
				if body != "" || hits.Load() != before {
					t.Fatalf("Floodgate down: body %q, app asked %d times", body, hits.Load()-before)
				}
			case 200:
				if body != c.body {
					t.Fatalf("body %q, want %q", body, c.body)
				}
			default:
				checkFailureBody(t, resp, body, "")
			}
		})
	}
	t.Run("limit", func(t *testing.T) {
		auth := freePort(t)
		startDaemon(t, fmt.Sprintf(limitedConfig, auth), auth)
		addr, log := startTraefik(t, traefik, auth, app.URL)
		for i := range 3 {
			if resp, body := testkit.Do(t, "POST", "http://"+addr+"/api/items", ""); resp.StatusCode != 200 {
				t.Fatalf("request %d: %d %q; traefik log:\n%s", i+1, resp.StatusCode, body, log)
			}
		}
		resp, body := testkit.Do(t, "POST", "http://"+addr+"/api/items", "")
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("RateLimit-Policy") != `"api";q=3;w=60` ||
			!strings.HasPrefix(resp.Header.Get("RateLimit"), `"api";r=0;t=`) || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("4th request: %d %v %q", resp.StatusCode, resp.Header, body)
		}
	})
}

// limitedConfig is a forward-auth Floodgate (%q: its address) with a
// memory store: 3 requests a minute, GET /healthz unlimited.
const limitedConfig = `
forward_auth: {listen: %q}
admin: {listen: "off"}
trusted_proxies: ["127.0.0.1"]
log: {level: error}
policies:
  api: {quota: 3, window: 1m}
rules:
  - {name: health, match: "GET /healthz", skip: true}
  - {name: api, match: "/", policies: [api]}
`

// startTraefik runs examples/traefik's traefik.yml and dynamic.yml with
// the entry point on a free port, ForwardAuth asking auth and the app at
// appURL, until the test ends; it returns the proxy's address and its log
// once the router answers. Traefik's update check and usage report are
// off: the test reaches nothing beyond loopback.
func startTraefik(t *testing.T, traefik, auth, appURL string) (string, *testkit.Buffer) {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile("../../examples/traefik/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	dir := t.TempDir()
	proxy := freePort(t)
	dynamic := strings.NewReplacer(`"http://127.0.0.1:8081/v1/auth"`, `"http://`+auth+`/v1/auth"`,
		`"http://127.0.0.1:3000"`, `"`+appURL+`"`).Replace(read("dynamic.yml"))
	static := strings.NewReplacer(`"127.0.0.1:8000"`, `"`+proxy+`"`,
		"filename: dynamic.yml", "filename: "+filepath.Join(dir, "dynamic.yml")).Replace(read("traefik.yml")) +
		"global: {checkNewVersion: false, sendAnonymousUsage: false}\n"
	if !strings.Contains(dynamic, auth) || !strings.Contains(dynamic, appURL) || !strings.Contains(static, proxy) {
		t.Fatal("examples/traefik lost the addresses this test replaces")
	}
	os.WriteFile(filepath.Join(dir, "dynamic.yml"), []byte(dynamic), 0o644)
	os.WriteFile(filepath.Join(dir, "traefik.yml"), []byte(static), 0o644)
	cmd := exec.Command(traefik, "--configFile="+filepath.Join(dir, "traefik.yml"))
	cmd.Dir = dir
	out := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
		}
	})
	waitPort(t, proxy, out)
	// The file provider loads the routers after the entry point opens:
	// until then every path is a 404. GET /healthz spends no quota.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + proxy + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				return proxy, out
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("traefik has no router after 10s; log:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
