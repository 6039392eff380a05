package redisstore

import (
	"context"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strconv"
	"testing"

	"github.com/floodgate/floodgate"
)

// TestWireCodes pins each algorithm's wire code on both sides of the
// protocol: the Go table that encodes requests and the WIRE table of
// lua/dispatch.lua that dispatches them. Reordering floodgate.Algorithm's
// constants must change neither. The codes of the requests no algorithm
// decides alone (a calendar period, a slot's acquire and release) are
// pinned on both sides too, and every code is distinct.
func TestWireCodes(t *testing.T) {
	want := map[floodgate.Algorithm]byte{
		floodgate.FixedWindow:          1,
		floodgate.SlidingWindowLog:     2,
		floodgate.SlidingWindowCounter: 3,
		floodgate.TokenBucket:          4,
		floodgate.GCRA:                 5,
		floodgate.AnchoredWindow:       9,
	}
	loader := map[floodgate.Algorithm]string{
		floodgate.FixedWindow:          "fixed_window",
		floodgate.SlidingWindowLog:     "sliding_log",
		floodgate.SlidingWindowCounter: "sliding_counter",
		floodgate.TokenBucket:          "token_bucket",
		floodgate.GCRA:                 "gcra",
		floodgate.AnchoredWindow:       "anchored_window",
	}
	for _, a := range floodgate.Algorithms() {
		if _, ok := want[a]; !ok {
			t.Errorf("algorithm %v has no wire code pinned here", a)
		}
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
	other := map[string]byte{"CALENDAR": 6, "ACQUIRE": 7, "RELEASE": 8}
	goSide := map[string]byte{"CALENDAR": calendarCode, "ACQUIRE": acquireCode, "RELEASE": releaseCode}
	luaSide := map[string]byte{}
	for _, m := range regexp.MustCompile(`(?m)^local ([A-Z]+) = (\d+)$`).FindAllStringSubmatch(string(src), -1) {
		n, _ := strconv.Atoi(m[2])
		luaSide[m[1]] = byte(n)
	}
	for name, code := range other {
		if goSide[name] != code || luaSide[name] != code {
			t.Errorf("%s: Go %d, dispatch.lua %d, want %d", name, goSide[name], luaSide[name], code)
		}
		if _, ok := lua[code]; ok {
			t.Errorf("%s's code %d is also an algorithm's", name, code)
		}
	}
}

// TestMulDivExact runs the script's muldiv on the server for products far
// beyond 2^53, where doubles lose units, and compares it with big-integer
// arithmetic: floor(a·b/c) and the remainder, exactly.
func TestMulDivExact(t *testing.T) {
	rdb := standaloneClient(t)
	const top = 1 << 53
	rng := rand.New(rand.NewPCG(5, 8))
	cases := [][3]int64{{0, 5, 7}, {5, 0, 7}, {top - 1, top - 1, top - 1}, {top - 1, 1, top}, {top - 1, top - 2, top - 1}, {1, 1, 1}, {3, 7, 2}}
	for len(cases) < 2000 {
		c := 1 + rng.Int64N(int64(1)<<rng.IntN(54))
		a := rng.Int64N(int64(1) << rng.IntN(54))
		most := new(big.Int).Mul(big.NewInt(top-1), big.NewInt(c)) // a·b < top·c keeps the quotient below 2^53
		if a > 0 {
			most.Quo(most, big.NewInt(a))
		}
		if !most.IsInt64() || most.Int64() > top {
			most.SetInt64(top)
		}
		cases = append(cases, [3]int64{a, rng.Int64N(most.Int64() + 1), c})
	}
	args := make([]any, 0, 3*len(cases))
	for _, c := range cases {
		args = append(args, c[0], c[1], c[2])
	}
	src := luaCode + `floor, max = math.floor, math.max
local out = {}
for i = 1, #ARGV, 3 do
  local q, r = muldiv(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]))
  out[#out + 1], out[#out + 2] = q, r
end
return out
`
	got, err := rdb.Eval(context.Background(), src, nil, args...).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		q, r := new(big.Int).QuoRem(new(big.Int).Mul(big.NewInt(c[0]), big.NewInt(c[1])), big.NewInt(c[2]), new(big.Int))
		if got[2*i] != q.Int64() || got[2*i+1] != r.Int64() {
			t.Errorf("muldiv(%d, %d, %d) = %d, %d; want %d, %d", c[0], c[1], c[2], got[2*i], got[2*i+1], q, r)
		}
	}
}
