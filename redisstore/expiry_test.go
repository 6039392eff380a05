package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
)

// TestBucketExpiry checks the token bucket's and GCRA's expiry (see
// lua/bucket.lua): a key is given one second of headroom past the time its
// state differs from a full bucket, keeps that TTL while it covers the
// time needed, and is given a new one, again with headroom, when an
// admitted cost needs more. The server's clock is used, so that PTTL
// means what the script meant; the bounds leave 200 ms for a slow machine.
func TestBucketExpiry(t *testing.T) {
	rdb := standaloneClient(t)
	s := newTestStore(t, rdb)
	ctx := context.Background()
	for _, a := range []floodgate.Algorithm{floodgate.TokenBucket, floodgate.GCRA} {
		t.Run(a.String(), func(t *testing.T) {
			// 10 per second: each unit is 100 ms of debt.
			p := []floodgate.Policy{{Name: "exp", Algorithm: a, Quota: 10, Window: time.Second, Burst: 100}}
			res := make([]floodgate.Result, 1)
			take := func(key string, n int64) time.Duration {
				t.Helper()
				if err := s.Take(ctx, key, floodgate.Cost{Requests: n}, p, res); err != nil || !res[0].Allowed {
					t.Fatalf("take %d: %+v, %v", n, res[0], err)
				}
				ttl, err := rdb.PTTL(ctx, redisKey(s.prefix, tag(key, s.maxKeyLen), &p[0])).Result()
				if err != nil {
					t.Fatal(err)
				}
				return ttl
			}
			within := func(what string, ttl, lo, hi time.Duration) {
				t.Helper()
				if ttl < lo || ttl > hi {
					t.Errorf("%s: PTTL %v, want within [%v, %v]", what, ttl, lo, hi)
				}
			}

			// One unit: needed in 100 ms, set to expire 1 s after that.
			key := "k-" + a.String()
			first := take(key, 1)
			within("after one unit", first, 900*time.Millisecond, 1100*time.Millisecond)

			// A second unit needs 200 ms, which the expiry set covers: the TTL
			// is kept, not pushed back. A pause of more than half a second
			// between the two would make the second move it, so the pair is
			// tried again on a new key when the machine paused.
			kept := false
			for try := 0; try < 10 && !kept; try++ {
				k := key + "-pair-" + string(rune('a'+try))
				started := time.Now()
				t1 := take(k, 1)
				t2 := take(k, 1)
				if time.Since(started) > 500*time.Millisecond {
					continue
				}
				if t2 > t1 {
					t.Fatalf("second unit pushed the TTL back: %v, then %v", t1, t2)
				}
				kept = true
			}
			if !kept {
				t.Fatal("no pair of takes within half a second in 10 tries")
			}

			// 50 units more need 5.1 s, past the expiry set: a new one, 1 s
			// past that.
			within("after 51 units", take(key, 50), 5900*time.Millisecond, 6100*time.Millisecond)
		})
	}
}
