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

// BoundKey returns key, or for a key longer than MaxKeyBytes "#" and the
// 64 hex digits of its SHA-256 (65 bytes). Distinct long keys keep
// distinct counters; a short key never starts with "#" and 64 hex digits
// by accident unless a client chose it to, and then it only shares the
// counter of the long key it names.
func BoundKey(key string) string {
	if len(key) <= MaxKeyBytes {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "#" + hex.EncodeToString(sum[:])
}
