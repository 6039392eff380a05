package redisstore

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"strings"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// scriptParts are the files concatenated, in this order, into the one
// script that is loaded: shared helpers, one file per algorithm (bucket.lua
// holds what the token bucket and GCRA share), then the dispatcher, which
// calls each policy's algorithm by its floodgate.Algorithm value.
var scriptParts = []string{
	"prelude.lua",
	"fixed_window.lua",
	"sliding_log.lua",
	"sliding_counter.lua",
	"bucket.lua",
	"token_bucket.lua",
	"gcra.lua",
	"dispatch.lua",
}

// script is the source loaded into Redis, and scriptSHA its SHA-1 (hex),
// the name EVALSHA calls it by.
var script, scriptSHA = buildScript()

func buildScript() (string, string) {
	var b strings.Builder
	for _, name := range scriptParts {
		src, err := luaFiles.ReadFile("lua/" + name)
		if err != nil {
			panic("redisstore: missing embedded script " + name)
		}
		b.Write(src)
		b.WriteByte('\n')
	}
	src := b.String()
	sum := sha1.Sum([]byte(src))
	return src, hex.EncodeToString(sum[:])
}

// Script returns the Lua source the store loads and its SHA-1, for tools
// such as redis-benchmark (docs/REDIS.md describes the arguments).
func Script() (src, sha string) { return script, scriptSHA }
