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

// TestForeignTypeFailsItsRequestOnly: a key holding a value of another
// type (a list where a window's string belongs, a string where a sliding
// log's sorted set belongs) makes Redis refuse the script's command on it
// (WRONGTYPE). Only the request naming that key fails, with errKeyRefused,
// and writes nothing for its other policies (all or nothing); the other
// requests of the same script call are decided, the call counts as no
// failure for a breaker, and a lone request on such a key fails alone.
func TestForeignTypeFailsItsRequestOnly(t *testing.T) {
	rdb := standaloneClient(t)
	s := newTestStore(t, rdb)
	ctx := context.Background()
	fw := floodgate.Policy{Name: "ft", Algorithm: floodgate.FixedWindow, Quota: 10, Window: time.Minute}
	log := floodgate.Policy{Name: "ftl", Algorithm: floodgate.SlidingWindowLog, Quota: 10, Window: time.Minute}
	both := []floodgate.Policy{fw, log}
	key := func(k string, p *floodgate.Policy) string { return redisKey(s.prefix, tag(k, s.maxKeyLen), p) }
	if err := rdb.LPush(ctx, key("list", &fw), "x").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Expire(ctx, key("list", &fw), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, key("str", &log), "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}

	batch := []*request{
		s.request(tag("a", s.maxKeyLen), one, both[:1]),
		s.request(tag("list", s.maxKeyLen), one, both[:1]),
		s.request(tag("str", s.maxKeyLen), one, both),
		s.request(tag("b", s.maxKeyLen), one, both),
	}
	if failed := s.exec(ctx, batch); failed {
		t.Error("the call counted as failed: one foreign value would trip a breaker for every key")
	}
	for i, want := range []error{nil, errKeyRefused, errKeyRefused, nil} {
		if batch[i].err != want {
			t.Errorf("request %d: error %v, want %v", i, batch[i].err, want)
		}
	}
	for _, i := range []int{0, 3} {
		if o := batch[i].out; batch[i].err == nil && (o[0] != 1 || o[1] != 9) {
			t.Errorf("request %d: allowed %d, %d left; want admitted with 9 left", i, o[0], o[1])
		}
	}
	// The refused request spent nothing on its window: all or nothing.
	res := make([]floodgate.Result, 1)
	if err := s.Take(ctx, "str", one, both[:1], res); err != nil || res[0].Remaining != 9 {
		t.Errorf("the refused request's window afterwards: %+v, %v; want 9 left (nothing spent before)", res[0], err)
	}
	// Alone, by the lone request's path.
	if err := s.Take(ctx, "list", one, both[:1], res); !errors.Is(err, floodgate.ErrStoreUnavailable) || !errors.Is(err, errKeyRefused) {
		t.Errorf("a lone Take on the list: %v, want ErrStoreUnavailable wrapping errKeyRefused", err)
	}
}
