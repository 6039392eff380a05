package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/floodgate/floodgate"
)

// hashedMark starts every hashed tag. Keys that start with it are hashed
// too, so a literal key can never equal another key's hashed form.
const hashedMark = '#'

// tag returns the part of the Redis keys between '{' and '}' for a
// partition key: the key itself when it is 1 to maxLen bytes long, holds no
// '{' or '}' and does not start with '#'; otherwise '#' followed by the
// first 16 bytes of the key's SHA-256 in hex (33 bytes in all). A '}' in a
// literal tag would end it early and an empty tag ("{}") would make Redis
// Cluster hash each whole key name, sending the keys of one decision to
// different slots (CROSSSLOT); a long key would cost its length in every key
// name.
func tag(key string, maxLen int) string {
	if len(key) > 0 && len(key) <= maxLen && key[0] != hashedMark && !strings.ContainsAny(key, "{}") {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	var b [1 + 32]byte
	b[0] = hashedMark
	hex.Encode(b[1:], sum[:16])
	return string(b[:])
}

// algorithmSuffix ends each key name, so a policy whose algorithm changes
// starts afresh instead of misreading (or failing on) the old state.
var algorithmSuffix = [...]string{
	floodgate.FixedWindow:          "fw",
	floodgate.SlidingWindowLog:     "log",
	floodgate.SlidingWindowCounter: "swc",
	floodgate.TokenBucket:          "tb",
	floodgate.GCRA:                 "gcra",
	floodgate.AnchoredWindow:       "aw",
}

// redisKey is "<prefix>{<tag>}:<policy>:<algorithm>".
func redisKey(prefix, tag string, p *floodgate.Policy) string {
	return prefix + "{" + tag + "}:" + p.Name + ":" + algorithmSuffix[p.Algorithm]
}

// slot is the Redis Cluster hash slot of a tag: CRC16 (XMODEM) mod 16384.
func slot(tag string) uint16 {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^tag[i]]
	}
	return crc & 16383
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
