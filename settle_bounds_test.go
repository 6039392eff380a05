package floodgate_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/storetest"
)

// TestHugePostChargeKeepsRefusing: a post-charge of the largest cost (an
// upstream's cost header or a settlement naming math.MaxInt64) leaves the
// key in debt on every algorithm and store: the counter never wraps into
// admitting.
func TestHugePostChargeKeepsRefusing(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Epoch)
	stores := map[string]floodgate.Store{"memory": newMemory(t, clock.Now)}
	c := redis.NewClient(&redis.Options{Addr: testkit.Env(t, "FLOODGATE_TEST_REDIS")})
	t.Cleanup(func() { c.Close() })
	rs, err := redisstore.New(c, redisstore.WithClock(clock.Now), redisstore.WithPrefix(fmt.Sprintf("fgatk:%d:", time.Now().UnixNano())))
	if err != nil {
		t.Fatal(err)
	}
	stores["redis"] = rs
	for name, store := range stores {
		for _, a := range floodgate.Algorithms() {
			for _, huge := range []int64{math.MaxInt64, math.MaxInt64 / 2, 1 << 53} {
				p := floodgate.Policy{Name: "p", Algorithm: a, Quota: 10, Window: time.Hour}
				if a == floodgate.TokenBucket || a == floodgate.GCRA {
					p.Burst = 10
				}
				l, err := floodgate.NewLimiter(store, []floodgate.Policy{p}, floodgate.WithClock(clock))
				if err != nil {
					t.Fatal(err)
				}
				key := fmt.Sprintf("%s-%d", a, huge)
				r, err := l.Reserve(ctx, key, floodgate.Cost{Requests: 1})
				if err != nil || !r.Decision.Allowed {
					t.Fatalf("%s %s: reserve %+v %v", name, a, r.Decision, err)
				}
				_, serr := r.Settle(ctx, floodgate.Cost{Requests: huge})
				for i := 0; i < 3; i++ {
					d, err := l.Take(ctx, key, 1)
					if err == nil && d.Allowed {
						t.Errorf("%s %s: after a post-charge of %d (settle error %v), take %d admitted: %+v", name, a, huge, serr, i, d)
						break
					}
				}
			}
		}
	}
}
