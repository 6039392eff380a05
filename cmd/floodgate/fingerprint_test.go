package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// TestFingerprintCommand: floodgate fingerprint prints the fingerprint
// that the running daemon's top offenders show for a client locked out of
// login (same ops.fingerprint_secret), the partition key of its IP and of
// an API key read from standard input, and refuses a file without the
// secret and a key that does not fit the rule.
func TestFingerprintCommand(t *testing.T) {
	gw, admin := freePort(t), freePort(t)
	yaml := fmt.Sprintf(`
gateway: {listen: %q, upstream: demo}
admin: {listen: %q}
log: {level: error}
ops: {fingerprint_secret: "fp-secret-0123456789"}
policies:
  login: {quota: 1, window: 1h}
  api: {quota: 100, window: 1h}
rules:
  - {name: login, match: "POST /login", key: "{ip}|{route}", policies: [login]}
  - {name: api, match: "/api/", key: "{api_key}", policies: [api]}
`, gw, admin)
	d := startDaemon(t, yaml, admin)
	for range 3 {
		testkit.Do(t, "POST", "http://"+gw+"/login", "")
	}
	_, body := testkit.Do(t, "GET", "http://"+admin+"/v1/admin/top?rule=login", "")
	var top struct {
		Rules map[string][]struct{ Key string } `json:"rules"`
	}
	if err := json.Unmarshal([]byte(body), &top); err != nil || len(top.Rules["login"]) != 1 {
		t.Fatalf("top offenders: %v %s", err, body)
	}
	out, err := exec.Command(binary, "fingerprint", "-c", d.file, "--rule", "login", "::ffff:127.0.0.1|POST /login").CombinedOutput()
	want := "partition key  127.0.0.1|POST /login\nfingerprint    " + top.Rules["login"][0].Key + "\nlimits         /v1/limits/127.0.0.1%7CPOST%20%2Flogin?rule=login&form=partition\n"
	if err != nil || string(out) != want {
		t.Errorf("fingerprint: %v\n%s\nwant\n%s", err, out, want)
	}
	cmd := exec.Command(binary, "fingerprint", "-c", d.file, "--rule", "api", "--api-key-stdin", "-")
	cmd.Stdin = strings.NewReader("cust-key-0123456789\n")
	// sha256("cust-key-0123456789")[:8], as the {api_key} part counts it.
	if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "partition key  699e05577c6de478\n") {
		t.Errorf("fingerprint --api-key-stdin: %v\n%s", err, out)
	}
	out, err = exec.Command(binary, "fingerprint", "-c", d.file, "--rule", "login", "127.0.0.1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `give 2 "|"-separated parts, got 1`) {
		t.Errorf("a key without its route: %v\n%s", err, out)
	}
	out, err = exec.Command(binary, "fingerprint", "-c", "../../examples/quickstart.yaml", "127.0.0.1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "ops.fingerprint_secret is not set") {
		t.Errorf("without the secret: %v\n%s", err, out)
	}
}
