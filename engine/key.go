package engine

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxKeyBytes is the longest partition key kept as it is. A longer one is
// replaced by BoundKey's digest before any store, blocker or observer
// sees it, so a store's memory is bounded in bytes, not only in keys: no
// key costs more than MaxKeyBytes.
const MaxKeyBytes = 256

// BoundKey returns key, or for a key longer than MaxKeyBytes, or one
// starting with "#", "#" and the 64 hex digits of its SHA-256 (65 bytes).
// Distinct long keys keep distinct counters, and since every key that
// starts with "#" is hashed, no key sent as it is can name another's
// digest and share its counter.
func BoundKey(key string) string {
	if len(key) <= MaxKeyBytes && (key == "" || key[0] != '#') {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "#" + hex.EncodeToString(sum[:])
}
