package redisstore

import (
	"encoding/binary"
	"math"
	"time"

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
	floodgate.AnchoredWindow:       9, // 6, 7 and 8: calendarCode, acquireCode, releaseCode
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

// calendarCode is the wire code of a fixed window with a floodgate.Calendar:
// its capacity field carries the period's start (µs), its window the
// period's length.
const calendarCode = 6

// acquireCode and releaseCode are the wire codes of a slot's requests
// (lua/slots.lua): CALENDAR, ACQUIRE and RELEASE in lua/dispatch.lua
// (TestWireCodes pins both sides).
const (
	acquireCode = 7
	releaseCode = 8
)

// token is a slot holder's random name; its member in the slot set is its
// 24 hex digits.
type token [12]byte

// encodeAcquire writes r's argument to take one slot of a cap of slots
// for lease ms: now -1 (a slot's times are always the server's: its set
// expires on the server's clock), acquireCode, slots and lease as
// big-endian doubles, then tok; 37 bytes, a length no request of policies
// has (lua/dispatch.lua). A cap beyond 2^53 is rounded, as Lua's tonumber
// rounded the decimal argument of earlier versions.
func (r *request) encodeAcquire(slots, lease int64, tok *token) {
	b := appendFloat(r.arg[:0], -1)
	b = append(b, acquireCode)
	b = appendFloat(b, slots)
	b = appendFloat(b, lease)
	r.arg = append(b, tok[:]...)
}

// encodeRelease writes r's argument to give back tok's slot: now -1,
// releaseCode, tok; 21 bytes.
func (r *request) encodeRelease(tok *token) {
	b := appendFloat(r.arg[:0], -1)
	b = append(b, releaseCode)
	r.arg = append(b, tok[:]...)
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
		if p.Calendar != nil {
			b = appendCalendar(b, p, now, cost)
			continue
		}
		b = append(b, wireCode[p.Algorithm])
		b = appendFloat(b, p.Quota)
		b = appendFloat(b, p.Capacity())
		b = appendFloat(b, p.Window.Microseconds())
		b = appendFloat(b, cost.Of(p.Unit))
	}
	r.arg = b
}

// appendCalendar encodes a calendar policy: the period that holds now, on
// the local clock when now is the server's. (A refund finds the period of
// its cost from the state, which keeps its period's start and length.)
func appendCalendar(b []byte, p *floodgate.Policy, now int64, cost floodgate.Cost) []byte {
	if now < 0 {
		now = time.Now().UnixMicro()
	}
	start, length := p.Span(now)
	b = append(b, calendarCode)
	b = appendFloat(b, p.Quota)
	b = appendFloat(b, start)
	b = appendFloat(b, length)
	return appendFloat(b, cost.Of(p.Unit))
}

func appendFloat(b []byte, x int64) []byte {
	return binary.BigEndian.AppendUint64(b, math.Float64bits(float64(x)))
}
