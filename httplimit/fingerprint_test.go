package httplimit

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// TestFingerprintKeyed: a fingerprint is not a plain hash of the key, which
// anyone could compute for every IPv4 address; it depends on the secret,
// and is stable under one secret.
func TestFingerprintKeyed(t *testing.T) {
	defer SetFingerprintSecret(*fingerprintSecret.Load())
	sum := sha256.Sum256([]byte("127.0.0.1"))
	if got := Fingerprint("127.0.0.1"); got == hex.EncodeToString(sum[:8]) || len(got) != 16 {
		t.Fatalf("Fingerprint = %q, the plain SHA-256 prefix", got)
	}
	SetFingerprintSecret([]byte("deployment-a"))
	a := Fingerprint("127.0.0.1")
	SetFingerprintSecret([]byte("deployment-b"))
	if b := Fingerprint("127.0.0.1"); a == b {
		t.Fatal("two secrets gave one fingerprint")
	}
	SetFingerprintSecret([]byte("deployment-a"))
	if again := Fingerprint("127.0.0.1"); again != a {
		t.Fatalf("one secret gave %q then %q", a, again)
	}
}
