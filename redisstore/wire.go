package redisstore

import (
	"encoding/binary"
	"math"

	"github.com/floodgate/floodgate"
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

// encode writes r's script argument (see lua/dispatch.lua): now (µs, or -1
// for the server's TIME); for a post-charge -1, for a refund the time (µs)
// its cost was admitted at; then per policy its wire code and quota,
// capacity, window (µs) and cost as big-endian doubles. Policy.Validate
// and CheckCost keep every number below 2^53, so the doubles are exact;
// the script decodes them with one unpack per policy instead of parsing
// decimal text.
func (r *request) encode(now int64, policies []floodgate.Policy, cost floodgate.Cost) {
	b := r.arg[:0]
	if need := 16 + 33*len(policies); cap(b) < need {
		b = make([]byte, 0, need)
	}
	b = appendFloat(b, now)
	switch cost.Kind {
	case floodgate.Post:
		b = appendFloat(b, -1)
	case floodgate.Refund:
		b = appendFloat(b, cost.At.UnixMicro())
	}
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
