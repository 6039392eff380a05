package redisstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/storetest"
)

// TestBucketExpiryAfterRaise: a bucket key lives at most the headroom
// longer than its state needs, also after a raise that brings the time
// needed far earlier than the expiry set under the old policy: the first
// admission under the raised policy moves the expiry back, instead of
// keeping (KEEPTTL) the old one, hours away. Ten units are spent at 1 per
// hour (needed 10 h away), then one under 10 per second with a burst of
// 100 (11 units owed, needed 1.1 s away); under WithClock every TTL is a
// minute longer.
func TestBucketExpiryAfterRaise(t *testing.T) {
	rdb := standaloneClient(t)
	clock := storetest.NewClock(storetest.Epoch)
	s := newTestStore(t, rdb, WithClock(clock.Now))
	ctx := context.Background()
	for _, a := range []floodgate.Algorithm{floodgate.TokenBucket, floodgate.GCRA} {
		t.Run(a.String(), func(t *testing.T) {
			slow := []floodgate.Policy{{Name: "raise", Algorithm: a, Quota: 1, Window: time.Hour, Burst: 10}}
			fast := []floodgate.Policy{{Name: "raise", Algorithm: a, Quota: 10, Window: time.Second, Burst: 100}}
			res := make([]floodgate.Result, 1)
			take := func(ps []floodgate.Policy, n int64) time.Duration {
				t.Helper()
				if err := s.Take(ctx, "k", floodgate.Cost{Requests: n}, ps, res); err != nil || !res[0].Allowed {
					t.Fatalf("take %d: %+v, %v", n, res[0], err)
				}
				ttl, err := rdb.PTTL(ctx, redisKey(s.prefix, tag("k", s.maxKeyLen), &ps[0])).Result()
				if err != nil {
					t.Fatal(err)
				}
				return ttl
			}
			if ttl := take(slow, 10); ttl < 10*time.Hour {
				t.Fatalf("after 10 units at 1 per hour: PTTL %v, want at least 10 h", ttl)
			}
			if ttl := take(fast, 1); ttl > 1100*time.Millisecond+time.Second+testClockSlack {
				t.Errorf("after the raise: PTTL %v, want at most 1.1 s + 1 s of headroom + %v", ttl, testClockSlack)
			}
			if res[0].Remaining != 89 {
				t.Errorf("after the raise: %d remaining, want 89", res[0].Remaining)
			}
		})
	}
}

// TestBucketExpiryOfForeignStates: a bucket state whose E this code cannot
// have written (infinite, NaN, or further than the headroom past the time
// needed) does not keep its key's TTL: the first admission sets it from
// the time needed, so the TTL, here an hour, is never carried along on
// such a value.
func TestBucketExpiryOfForeignStates(t *testing.T) {
	rdb := standaloneClient(t)
	clock := storetest.NewClock(storetest.Epoch)
	s := newTestStore(t, rdb, WithClock(clock.Now))
	ctx := context.Background()
	now := float64(clock.Now().UnixMicro())
	const w = 1e6
	for i, c := range []struct {
		a     floodgate.Algorithm
		state []float64
	}{
		{floodgate.TokenBucket, []float64{now, 0, math.Inf(1), w}},
		{floodgate.TokenBucket, []float64{now, 0, math.NaN(), w}},
		{floodgate.TokenBucket, []float64{now, 0, now + 3600*w, w}},
		{floodgate.GCRA, []float64{now, 0, 10, w, math.Inf(1)}},
		{floodgate.GCRA, []float64{now, 0, 10, w, math.NaN()}},
		{floodgate.GCRA, []float64{now, 0, 10, w, now + 3600*w}},
	} {
		p := []floodgate.Policy{{Name: "foreign", Algorithm: c.a, Quota: 10, Window: time.Second}}
		key := fmt.Sprint("k", i)
		rk := redisKey(s.prefix, tag(key, s.maxKeyLen), &p[0])
		if err := rdb.Set(ctx, rk, fpacked(c.state...), time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		res := make([]floodgate.Result, 1)
		if err := s.Take(ctx, key, one, p, res); err != nil || !res[0].Allowed || res[0].Remaining != 9 {
			t.Fatalf("%v from %v: %+v, %v; want admitted, 9 left", c.a, c.state, res[0], err)
		}
		ttl, err := rdb.PTTL(ctx, rk).Result()
		if err != nil {
			t.Fatal(err)
		}
		// One unit needs 100 ms, then 1 s of headroom.
		if ttl > 1100*time.Millisecond+testClockSlack {
			t.Errorf("%v from %v: PTTL %v, want at most 1.1 s + %v", c.a, c.state, ttl, testClockSlack)
		}
	}
}

// fpacked is a state of big-endian doubles, any of them.
func fpacked(fields ...float64) string {
	b := make([]byte, 8*len(fields))
	for i, f := range fields {
		binary.BigEndian.PutUint64(b[8*i:], math.Float64bits(f))
	}
	return string(b)
}
