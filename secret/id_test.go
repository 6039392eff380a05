package secret

import "testing"

// TestID: the first 8 bytes of SHA-256, in hex (sha256sum of "secret-key-carol").
func TestID(t *testing.T) {
	if got, want := ID("secret-key-carol"), "3e1ff4b40c5a7a38"; got != want {
		t.Errorf("ID = %s, want %s", got, want)
	}
}
