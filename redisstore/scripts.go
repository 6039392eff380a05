package redisstore

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"strings"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// luaParts are the files concatenated, in this order, into the code that is
// loaded: shared helpers, one file per algorithm (bucket.lua holds what the
// token bucket and GCRA share), the in-flight slots, then the dispatcher,
// which defines decide(KEYS, ARGV) and calls each policy's algorithm by its
// wire code, and a slot's acquire or release by theirs.
var luaParts = []string{
	"prelude.lua",
	"fixed_window.lua",
	"sliding_log.lua",
	"sliding_counter.lua",
	"bucket.lua",
	"token_bucket.lua",
	"gcra.lua",
	"anchored_window.lua",
	"slots.lua",
	"dispatch.lua",
}

// The code is loaded in one of two forms. The function library (Redis 7
// and later: FUNCTION LOAD, then FCALL) is run once when loaded, so a call
// defines nothing; the script (EVALSHA) runs whole on every call, and is
// used where functions are not available or not allowed. functionName
// names both the library and its one function, and carries the code's
// hash, so that two versions of Floodgate sharing a server keep their own.
var (
	script, scriptSHA = buildScript()
	functionName      = "floodgate_" + scriptSHA[:16]
	library           = "#!lua name=" + functionName + "\n" + luaCode +
		"redis.register_function('" + functionName + "', decide)\n"
)

var luaCode = func() string {
	var b strings.Builder
	for _, name := range luaParts {
		src, err := luaFiles.ReadFile("lua/" + name)
		if err != nil {
			panic("redisstore: missing embedded script " + name)
		}
		b.Write(src)
		b.WriteByte('\n')
	}
	return b.String()
}()

func buildScript() (string, string) {
	src := luaCode + "return decide(KEYS, ARGV)\n"
	sum := sha1.Sum([]byte(src))
	return src, hex.EncodeToString(sum[:])
}

// Script returns the Lua source of the EVAL form and its SHA-1, for tools
// such as redis-benchmark (docs/REDIS.md describes the arguments).
func Script() (src, sha string) { return script, scriptSHA }
