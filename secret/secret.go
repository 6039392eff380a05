// Package secret compares secrets (admin tokens, bypass tokens) in a time
// that tells an attacker nothing about them, their length included, and
// names an API key by a digest that the doors store in its place. It is
// exported so that every door, the daemon and a door of your own, in
// whatever module, name a key by the same ID (tier sources store it).
package secret

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
)

// Equal reports whether got is want. Both are hashed (SHA-256) first, so
// the constant-time comparison always runs over 32 bytes: on the raw
// strings, subtle.ConstantTimeCompare returns at once when the lengths
// differ, which times want's length.
func Equal(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// ID returns the first 16 hex digits of the SHA-256 of a secret such as an
// API key: the partition key the doors store in its place (as tier.Hash.ID
// names a key), so that stores, logs and metrics never hold the secret.
// It is unkeyed, so that every replica and the tier sources agree on it;
// a secret worth guessing is too long to be found by hashing candidates.
func ID(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
