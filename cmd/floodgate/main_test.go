package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// binary is the floodgate command built once for the tests that run it as
// a real process.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "floodgate-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "floodgate")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building floodgate:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// service finds an external program a test needs: the environment
// variable scripts/services-up.sh exports, else PATH (with Debian's sbin).
// A missing program fails the test, except under -short.
func service(t *testing.T, env, name string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	path := os.Getenv("PATH") + ":/usr/local/sbin:/usr/sbin:/sbin"
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	if testing.Short() {
		t.Skipf("%s not installed (-short)", name)
	}
	t.Fatalf("%s is not installed and %s is not set: run scripts/services-up.sh (it installs %s) and load /tmp/floodgate-test/env", name, env, name)
	return ""
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitPort(t *testing.T, addr string, logs fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s after 10s; output:\n%s", addr, logs)
}

// daemon is a floodgate serve process.
type daemon struct {
	cmd  *exec.Cmd
	out  *testkit.Buffer
	file string
}

// startDaemon writes yaml to a file and runs floodgate serve on it,
// stopping it with SIGTERM at cleanup.
func startDaemon(t *testing.T, yaml string, waitFor string, args ...string) *daemon {
	t.Helper()
	d := &daemon{out: &testkit.Buffer{}, file: filepath.Join(t.TempDir(), "floodgate.yaml")}
	if err := os.WriteFile(d.file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(binary, append([]string{"serve", "-c", d.file}, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- d.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("floodgate exited with %v after SIGTERM; output:\n%s", err, d.out)
			}
		case <-time.After(15 * time.Second):
			d.cmd.Process.Kill()
			t.Errorf("floodgate did not stop within 15s of SIGTERM")
		}
	})
	waitPort(t, waitFor, d.out)
	return d
}

func TestValidateCommand(t *testing.T) {
	out, err := exec.Command(binary, "validate", "-c", "config/testdata/bad.yaml").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 12 || lines[11] != "11 error(s)" ||
		lines[0] != `config/testdata/bad.yaml:3: gateway.upstream: want an http:// or https:// URL with a host, or "demo"; got "ftp://example.com"` {
		t.Errorf("output:\n%s", out)
	}
	out, err = exec.Command(binary, "validate", "-c", "../../examples/quickstart.yaml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok: 4 policies, 4 rules, memory store") {
		t.Errorf("quickstart: %v\n%s", err, out)
	}
	// The file as an argument, as most checkers take it; not twice.
	out, err = exec.Command(binary, "validate", "../../examples/quickstart.yaml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok: 4 policies, 4 rules, memory store") {
		t.Errorf("validate FILE: %v\n%s", err, out)
	}
	// The Envoy example has no policies of its own: its domains are named.
	out, err = exec.Command(binary, "validate", "../../examples/envoy/floodgate.yaml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "envoy_rls 127.0.0.1:8081 (domains: edge)") {
		t.Errorf("validate the Envoy example: %v\n%s", err, out)
	}
	out, err = exec.Command(binary, "validate", "-c", "a.yaml", "b.yaml").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "give the file once: -c a.yaml or b.yaml") {
		t.Errorf("validate -c a.yaml b.yaml: %v\n%s", err, out)
	}
}

// TestQuickstart runs README's steps on examples/quickstart.yaml (moved to
// free ports): 200s with the rate-limit fields, then a 429 with
// Retry-After.
func TestQuickstart(t *testing.T) {
	b, err := os.ReadFile("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gw, api, admin := freePort(t), freePort(t), freePort(t)
	yaml := strings.NewReplacer(`"127.0.0.1:8080"`, `"`+gw+`"`, `"127.0.0.1:8081"`, `"`+api+`"`, `"127.0.0.1:9090"`, `"`+admin+`"`).Replace(string(b))
	startDaemon(t, yaml, gw)
	for i := 1; i <= 5; i++ {
		resp, body := testkit.Do(t, "POST", "http://"+gw+"/login", "")
		if resp.StatusCode != 200 || !strings.Contains(body, `"path":"/login"`) || resp.Header.Get("X-Ratelimit-Remaining") != fmt.Sprint(5-i) {
			t.Fatalf("login %d: %d %s %v", i, resp.StatusCode, body, resp.Header)
		}
	}
	resp, body := testkit.Do(t, "POST", "http://"+gw+"/login", "")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, `"violated-policies":["login"]`) {
		t.Errorf("6th login: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	if resp, _ := testkit.Do(t, "GET", "http://"+gw+"/healthz", ""); resp.StatusCode != 200 || resp.Header.Get("Ratelimit") != "" {
		t.Errorf("/healthz: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := testkit.Do(t, "GET", "http://"+admin+"/readyz", ""); resp.StatusCode != 200 {
		t.Errorf("/readyz: %d", resp.StatusCode)
	}
}
