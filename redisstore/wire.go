package redisstore

import (
	"encoding/binary"
	"math"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/algset"
)

// wireCode is each algorithm's code in the script's arguments: the keys of
// WIRE in lua/dispatch.lua. It is part of the protocol with the code loaded
// in Redis, fixed whatever the order of floodgate.Algorithm's constants
// (TestWireCodes pins both sides).
var wireCode = [...]byte{
	floodgate.FixedWindow:          1,
	floodgate.SlidingWindowLog:     2,
	floodgate.SlidingWindowCounter: 3,
	floodgate.TokenBucket:          4,
	floodgate.GCRA:                 5,
}

// spoken is the set of algorithms the store speaks: those with a wire
// code, which lua/dispatch.lua decides (TestWireCodes), and a key suffix.
var spoken = algset.Set(func(a floodgate.Algorithm) bool {
	return int(a) < len(wireCode) && wireCode[a] != 0 && int(a) < len(algorithmSuffix) && algorithmSuffix[a] != ""
})

// checkAlgorithms names the first of all the store does not speak.
func checkAlgorithms(all []floodgate.Algorithm) error {
	return spoken.Missing(all, "redisstore", "wireCode (redisstore/wire.go), algorithmSuffix (redisstore/keys.go) and lua/dispatch.lua")
}

// encode writes r's script argument (see lua/dispatch.lua): now (µs, or -1
// for the server's TIME), then per policy its wire code and quota,
// capacity, window (µs) and cost as big-endian doubles. Policy.Validate
// keeps every number below 2^53, so the doubles are exact; the script
// decodes them with one unpack per policy instead of parsing decimal text.
func (r *request) encode(now int64, policies []floodgate.Policy, cost floodgate.Cost) {
	b := r.arg[:0]
	if need := 8 + 33*len(policies); cap(b) < need {
		b = make([]byte, 0, need)
	}
	b = appendFloat(b, now)
	for i := range policies {
		p := &policies[i]
		b = append(b, wireCode[p.Algorithm])
		b = appendFloat(b, p.Quota)
		b = appendFloat(b, p.Capacity())
		b = appendFloat(b, p.Window.Microseconds())
		b = appendFloat(b, cost.Of(p.Unit))
	}
	r.arg = b
}

func appendFloat(b []byte, x int64) []byte {
	return binary.BigEndian.AppendUint64(b, math.Float64bits(float64(x)))
}
