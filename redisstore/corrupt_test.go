package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
)

// TestValueOutOfRange: a value at a key that Floodgate did not write, here
// a token bucket state whose debt is infinite, makes the script answer
// times no state of its own gives (Redis turns the infinite reset and
// retry into the most negative integer). Take reports that request as an
// error instead of passing a negative Retry-After on; the same policy on
// another key still decides.
func TestValueOutOfRange(t *testing.T) {
	rdb := standaloneClient(t)
	s := newTestStore(t, rdb)
	ctx := context.Background()
	p := []floodgate.Policy{{Name: "oor", Algorithm: floodgate.TokenBucket, Quota: 10, Window: time.Second}}
	rk := redisKey(s.prefix, tag("bad", s.maxKeyLen), &p[0])
	now := time.Now().UnixMicro()
	if err := rdb.Set(ctx, rk, packedFloat(float64(now), math.Inf(1), 0, 1e6), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	res := make([]floodgate.Result, 1)
	err := s.Take(ctx, "bad", one, p, res)
	if !errors.Is(err, floodgate.ErrStoreUnavailable) || !errors.Is(err, errOutOfRange) {
		t.Fatalf("Take on an infinite debt: %v (%+v), want ErrStoreUnavailable wrapping errOutOfRange", err, res[0])
	}
	if err := s.Take(ctx, "good", one, p, res); err != nil || !res[0].Allowed || res[0].Remaining != 9 {
		t.Fatalf("Take on a fresh key: %+v, %v; want admitted with 9 left", res[0], err)
	}
}

// packedFloat packs fields as big-endian doubles, as the script stores a
// state, for values packed (format_test.go) cannot hold.
func packedFloat(fields ...float64) string {
	b := make([]byte, 8*len(fields))
	for i, f := range fields {
		binary.BigEndian.PutUint64(b[8*i:], math.Float64bits(f))
	}
	return string(b)
}
