package main

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: the values scripts/build.sh stamps are what `floodgate
// version` prints; unstamped (go test has no VCS build info) each says
// "unknown" rather than nothing.
func TestVersion(t *testing.T) {
	if got, want := readBuildInfo().String(), "floodgate unknown\ncommit: unknown\ndate:   unknown\ngo:     "+runtime.Version(); got != want {
		t.Errorf("unstamped:\n%s\nwant:\n%s", got, want)
	}
	version, commit, date = "v1.4.0", "0123456789abcdef0123456789abcdef01234567", "2030-01-02T03:04:05Z"
	defer func() { version, commit, date = "", "", "" }()
	want := "floodgate v1.4.0\ncommit: 0123456789abcdef0123456789abcdef01234567\ndate:   2030-01-02T03:04:05Z\ngo:     " + runtime.Version()
	if got := readBuildInfo().String(); got != want {
		t.Errorf("stamped:\n%s\nwant:\n%s", got, want)
	}
}

// TestHealthcheckCommand is the container's HEALTHCHECK against a real
// daemon: 0 for /healthz, 1 with the status for anything else, 1 when
// nothing listens.
func TestHealthcheckCommand(t *testing.T) {
	api, admin := freePort(t), freePort(t)
	startDaemon(t, `
api: {listen: "`+api+`"}
admin: {listen: "`+admin+`"}
log: {level: warn}
policies: {p: {quota: 1, window: 1m}}
rules: [{name: r, match: "/", key: "{ip}", policies: [p]}]
`, admin)
	if out, err := exec.Command(binary, "healthcheck", "http://"+admin+"/healthz").CombinedOutput(); err != nil || len(out) != 0 {
		t.Errorf("/healthz: %v %q", err, out)
	}
	out, err := exec.Command(binary, "healthcheck", "http://"+admin+"/nope").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "answered 404 Not Found") {
		t.Errorf("/nope: %v %q", err, out)
	}
	closed := freePort(t)
	out, err = exec.Command(binary, "healthcheck", "--timeout", "2s", "http://"+closed+"/healthz").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "connection refused") {
		t.Errorf("closed port: %v %q", err, out)
	}
}
