package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// TestNginxAuthRequest puts a real nginx in front of an app, asking
// Floodgate through auth_request (REQUIREMENTS V3 with real input): 200s,
// then a 429 whose Retry-After and RateLimit fields nginx carried across,
// then 200 again once the window has passed.
func TestNginxAuthRequest(t *testing.T) {
	nginx := service(t, "FLOODGATE_TEST_NGINX", "nginx")
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "app saw %s %s", r.Method, r.URL.Path)
	}))
	defer app.Close()

	auth := freePort(t)
	startDaemon(t, fmt.Sprintf(`
forward_auth: {listen: %q}
admin: {listen: "off"}
trusted_proxies: ["127.0.0.1"]
log: {level: warn}
policies:
  api: {algorithm: sliding-window-log, quota: 3, window: 2s}
rules:
  - {name: api, match: "/api/", key: "{ip}|{route}", policies: [api]}
`, auth), auth)

	nginxAddr, dir := startNginx(t, nginx, auth, strings.TrimPrefix(app.URL, "http://"), nil)
	url := "http://" + nginxAddr + "/api/items"
	for i := 1; i <= 3; i++ {
		resp, body := testkit.Do(t, "GET", url, "")
		if resp.StatusCode != 200 || body != "app saw GET /api/items" {
			t.Fatalf("request %d: %d %q; nginx error log:\n%s", i, resp.StatusCode, body, readFile(dir, "error.log"))
		}
		// r is what is left, cut to what q/w allows before the window ends.
		var r, tw int
		got := resp.Header.Get("Ratelimit")
		if _, err := fmt.Sscanf(got, `"api";r=%d;t=%d`, &r, &tw); err != nil || r > 3-i || tw > 2 {
			t.Errorf("request %d: RateLimit = %q, want r ≤ %d, t ≤ 2", i, got, 3-i)
		}
		if got := resp.Header.Get("Ratelimit-Policy"); got != `"api";q=3;w=2` {
			t.Errorf("request %d: RateLimit-Policy = %q", i, got)
		}
	}
	resp, body := testkit.Do(t, "GET", url, "")
	if resp.StatusCode != 429 {
		t.Fatalf("4th request: %d %q; nginx error log:\n%s", resp.StatusCode, body, readFile(dir, "error.log"))
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 2 {
		t.Errorf("Retry-After = %q, want 1 or 2 seconds", resp.Header.Get("Retry-After"))
	}
	if got := resp.Header.Get("Ratelimit"); !strings.HasPrefix(got, `"api";r=0;t=`) {
		t.Errorf("429 RateLimit = %q", got)
	}
	if got := resp.Header.Get("Ratelimit-Policy"); got != `"api";q=3;w=2` {
		t.Errorf("429 RateLimit-Policy = %q", got)
	}
	if resp.Header.Get("X-Ratelimit-Remaining") != "0" || !strings.Contains(body, `"status":429`) || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("429: %v %q", resp.Header, body)
	}
	time.Sleep(time.Duration(ra)*time.Second + 100*time.Millisecond)
	if resp, body := testkit.Do(t, "GET", url, ""); resp.StatusCode != 200 {
		t.Errorf("after Retry-After: %d %q", resp.StatusCode, body)
	}
}

func readFile(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return string(b)
}

// startNginx runs nginx on examples/nginx/floodgate.conf with the test's
// ports (Floodgate's forward-auth at auth, the app at app), the server
// block rewritten by edit when it is not nil, until the test ends; it
// returns nginx's address and its directory (error.log).
func startNginx(t *testing.T, nginx, auth, app string, edit func(string) string) (string, string) {
	t.Helper()
	tmpl, err := os.ReadFile("../../examples/nginx/floodgate.conf")
	if err != nil {
		t.Fatal(err)
	}
	addr, dir := freePort(t), t.TempDir()
	site := strings.NewReplacer(
		"127.0.0.1:8081", auth,
		"127.0.0.1:3000", app,
		"listen 80;", "listen "+addr+";",
	).Replace(string(tmpl))
	if edit != nil {
		site = edit(site)
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // workers must read the temp dirs below
	}
	conf := fmt.Sprintf(`%s
worker_processes 1;
daemon off;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path %[2]s/body;
  proxy_temp_path %[2]s/proxy;
  fastcgi_temp_path %[2]s/fastcgi;
  uwsgi_temp_path %[2]s/uwsgi;
  scgi_temp_path %[2]s/scgi;
%[3]s
}
`, user, dir, site)
	confFile := filepath.Join(dir, "nginx.conf")
	os.WriteFile(confFile, []byte(conf), 0o644)
	if out, err := exec.Command(nginx, "-t", "-p", dir, "-c", confFile).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s\n%s", err, out, conf)
	}
	cmd := exec.Command(nginx, "-p", dir, "-c", confFile)
	out := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGQUIT)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
		}
	})
	waitPort(t, addr, out)
	return addr, dir
}
