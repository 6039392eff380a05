package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// TestCaddyFailureModes runs examples/caddy/Caddyfile in a real Caddy
// (Debian's) with Floodgate not running and with Floodgate's store down:
// fail-open at the proxy lets the demo app answer, marked
// Floodgate-Degraded, where Caddy alone answers 502 for the whole site;
// fail-closed is a 503 with Retry-After; with its store down, Floodgate's
// fail-open 200 lets the request through and its fail-closed 503 reaches
// the client as Floodgate wrote it.
func TestCaddyFailureModes(t *testing.T) {
	caddy := service(t, "FLOODGATE_TEST_CADDY", "caddy")
	for _, c := range []struct {
		name     string
		mode     string // Floodgate's failure mode; "" for Floodgate not running
		edit     func(string) string
		status   int
		degraded string
		retry    string
	}{
		{"Floodgate down, fail-open", "", nil, 200, "floodgate-unreachable", ""},
		{"Floodgate down, fail-closed", "", failClosed, 503, "floodgate-unreachable", "5"},
		// Floodgate's 200 marked Floodgate-Degraded: copy_headers puts the
		// mark on the request to the app, not on the client's response.
		{"store down, Floodgate fail-open", "fail-open", nil, 200, "", ""},
		{"store down, Floodgate fail-closed", "fail-closed", failClosed, 503, "store-unavailable", "1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			auth := freePort(t)
			if c.mode != "" {
				startDaemon(t, fmt.Sprintf(storeDownConfig, auth, c.mode), auth)
			}
			addr, log := startCaddy(t, caddy, auth, c.edit)
			resp, body := testkit.Do(t, "POST", "http://"+addr+"/api/items", "")
			if resp.StatusCode != c.status || resp.Header.Get("Floodgate-Degraded") != c.degraded || resp.Header.Get("Retry-After") != c.retry {
				t.Fatalf("%d %v %q; caddy log:\n%s", resp.StatusCode, resp.Header, body, log)
			}
			checkFailureBody(t, resp, body, `{"ok":true,"method":"POST","path":"/api/items"}`)
		})
	}
}

// startCaddy runs examples/caddy/Caddyfile (rewritten by edit when not
// nil) with its proxy and demo app on free ports and forward_auth asking
// auth, until the test ends; it returns the proxy's address and its log.
func startCaddy(t *testing.T, caddy, auth string, edit func(string) string) (string, *testkit.Buffer) {
	t.Helper()
	b, err := os.ReadFile("../../examples/caddy/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	if edit != nil {
		conf = edit(conf)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "Caddyfile")
	os.WriteFile(file, []byte(conf), 0o644)
	proxy, app := freePort(t), freePort(t)
	cmd := exec.Command(caddy, "run", "--adapter", "caddyfile", "--config", file)
	cmd.Env = append(os.Environ(), "PROXY_PORT="+proxy[strings.LastIndexByte(proxy, ':')+1:], "APP="+app,
		"FLOODGATE_AUTH="+auth, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
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
	waitPort(t, app, out)
	return proxy, out
}
