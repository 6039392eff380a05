package redisstore

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/floodgate/floodgate"
)

// TestWireCodes pins each algorithm's wire code on both sides of the
// protocol: the Go table that encodes requests and the WIRE table of
// lua/dispatch.lua that dispatches them. Reordering floodgate.Algorithm's
// constants must change neither.
func TestWireCodes(t *testing.T) {
	want := map[floodgate.Algorithm]byte{
		floodgate.FixedWindow:          1,
		floodgate.SlidingWindowLog:     2,
		floodgate.SlidingWindowCounter: 3,
		floodgate.TokenBucket:          4,
		floodgate.GCRA:                 5,
	}
	loader := map[floodgate.Algorithm]string{
		floodgate.FixedWindow:          "fixed_window",
		floodgate.SlidingWindowLog:     "sliding_log",
		floodgate.SlidingWindowCounter: "sliding_counter",
		floodgate.TokenBucket:          "token_bucket",
		floodgate.GCRA:                 "gcra",
	}
	src, err := luaFiles.ReadFile("lua/dispatch.lua")
	if err != nil {
		t.Fatal(err)
	}
	lua := map[byte]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*\[(\d+)\] = (\w+),$`).FindAllStringSubmatch(string(src), -1) {
		n, _ := strconv.Atoi(m[1])
		lua[byte(n)] = m[2]
	}
	if len(lua) != len(want) {
		t.Fatalf("dispatch.lua's WIRE has %d codes, want %d: %v", len(lua), len(want), lua)
	}
	for a, code := range want {
		if got := wireCode[a]; got != code {
			t.Errorf("wireCode[%v] = %d, want %d", a, got, code)
		}
		if lua[code] != loader[a] {
			t.Errorf("dispatch.lua WIRE[%d] = %q, want %q (%v)", code, lua[code], loader[a], a)
		}
	}
}
