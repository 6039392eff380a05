package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/storetest"
)

// TestNearCacheFlood: 1,000 keys, 100 requests each, 90 % of them over the
// keys' limits. With the near cache, Redis sees at most 0.15 calls per
// request, and every answer — allowed or not, remaining, reset and
// retry-after — equals what the same sequence gets from Redis alone: the
// cache never admits what the store would refuse, and refuses nothing the
// store would admit.
func TestNearCacheFlood(t *testing.T) {
	const keys, perKey = 1000, 100
	ps := []floodgate.Policy{
		{Name: "burst", Algorithm: floodgate.GCRA, Quota: 10, Window: time.Minute, Burst: 10},
		{Name: "hour", Algorithm: floodgate.FixedWindow, Quota: 1000, Window: time.Hour},
	}
	run := func(opts ...Option) ([][]floodgate.Result, int64) {
		rdb := redis.NewClient(&redis.Options{Addr: testkit.Env(t, "FLOODGATE_TEST_REDIS")})
		t.Cleanup(func() { rdb.Close() })
		hook := &countingHook{}
		rdb.AddHook(hook)
		clock := storetest.NewClock(storetest.Epoch)
		s := newTestStore(t, rdb, append([]Option{WithClock(clock.Now)}, opts...)...)
		ctx := context.Background()
		got := make([][]floodgate.Result, 0, keys*perKey)
		for range perKey {
			clock.Advance(time.Millisecond)
			for k := range keys {
				res := make([]floodgate.Result, len(ps))
				if err := s.Take(ctx, "flood-"+strconv.Itoa(k), floodgate.Cost{Requests: 1}, ps, res); err != nil {
					t.Fatal(err)
				}
				got = append(got, res)
			}
		}
		return got, hook.n.Load()
	}
	plain, _ := run()
	cached, calls := run(WithNearCache(2*keys, 10*time.Millisecond))
	denied, answered := 0, 0
	for i := range plain {
		if !plain[i][0].Allowed || !plain[i][1].Allowed {
			denied++
		}
		first := cached[i][0].Cached
		if first {
			answered++
		}
		for j := range ps {
			if cached[i][j].Cached != first || plain[i][j].Cached {
				t.Fatalf("request %d, policy %s: Cached %v, its first policy's %v, Redis alone %v", i, ps[j].Name,
					cached[i][j].Cached, first, plain[i][j].Cached)
			}
			cached[i][j].Cached = false
			if cached[i][j] != plain[i][j] {
				t.Fatalf("request %d, policy %s: near cache answered %+v, Redis alone %+v", i, ps[j].Name, cached[i][j], plain[i][j])
			}
		}
	}
	if denied != keys*perKey*9/10 {
		t.Fatalf("%d of %d requests over their limit, want 90 %%", denied, keys*perKey)
	}
	perRequest := float64(calls) / (keys * perKey)
	t.Logf("%d Redis calls for %d requests: %.3f per request", calls, keys*perKey, perRequest)
	// Every request is either a Redis call or an answer marked Cached (the
	// store sends a few commands of its own, loading its script).
	if sent := keys*perKey - int64(answered); calls < sent || calls > sent+10 {
		t.Fatalf("%d answers marked Cached and %d Redis commands for %d requests", answered, calls, keys*perKey)
	}
	if perRequest > 0.15 {
		t.Fatalf("%.3f Redis calls per request under the flood, want at most 0.15", perRequest)
	}
}
