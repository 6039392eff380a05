package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestValidateRLQS: `floodgate validate` accepts docs/RLQS.md's
// floodgate.yaml and names its rlqs listener.
func TestValidateRLQS(t *testing.T) {
	out, err := exec.Command(binary, "validate", "../../examples/rlqs/floodgate.yaml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok: 2 policies, 0 rules, redis store; rlqs 127.0.0.1:8084") {
		t.Errorf("validate: %v\n%s", err, out)
	}
}
