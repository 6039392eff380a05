package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
)

// TestFieldsOfABurst: with a bucket's burst above or below its quota, the
// legacy fields speak of the bucket's capacity, so X-RateLimit-Remaining
// never exceeds X-RateLimit-Limit and the warning counts what the two
// say was used; the draft-11 fields keep q/w, the rate to pace by, and r
// never exceeds q (docs/ratelimit-headers.md §4).
func TestFieldsOfABurst(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	for _, c := range []struct {
		alg          floodgate.Algorithm
		burst, spend int64
		want         []string // the fields after each request
	}{
		{floodgate.TokenBucket, 20, 20, []string{
			1:  `200 r="p";r=10;t=1 limit=20 remaining=19 warning=""`,
			17: `200 r="p";r=3;t=1 limit=20 remaining=3 warning=""`,
			18: `200 r="p";r=2;t=1 limit=20 remaining=2 warning="approaching limit \"p\": 18 of 20 used"`,
			20: `200 r="p";r=0;t=1 limit=20 remaining=0 warning="approaching limit \"p\": 20 of 20 used"`,
		}},
		{floodgate.GCRA, 20, 21, []string{
			1:  `200 r="p";r=10;t=1 limit=20 remaining=19 warning=""`,
			21: `429 r="p";r=0;t=1 limit=20 remaining=0 warning=""`,
		}},
		{floodgate.TokenBucket, 5, 5, []string{
			1: `200 r="p";r=4;t=1 limit=5 remaining=4 warning=""`,
			5: `200 r="p";r=0;t=1 limit=5 remaining=0 warning="approaching limit \"p\": 5 of 5 used"`,
		}},
	} {
		p := floodgate.Policy{Name: "p", Algorithm: c.alg, Quota: 10, Window: time.Second, Burst: c.burst}
		eng, err := engine.New(engine.Config{Store: testkit.Memory(t, memorystore.WithClock(func() time.Time { return at }))})
		if err != nil {
			t.Fatal(err)
		}
		rule, err := eng.Compile(engine.Rule{Name: "r", Policies: []floodgate.Policy{p}})
		if err != nil {
			t.Fatal(err)
		}
		f := &engine.Fields{Style: engine.Both, WarnAt: 0.9, Now: func() time.Time { return at }}
		for i := int64(1); i <= c.spend; i++ {
			out := rule.Decide(context.Background(), engine.Request{Key: "k", Cost: floodgate.Cost{Requests: 1}})
			h := http.Header{}
			f.Set(h, &out)
			status := 200
			if out.Verdict != engine.Allowed {
				status = 429
			}
			if h.Get("RateLimit-Policy") != `"p";q=10;w=1` {
				t.Errorf("%v burst %d: RateLimit-Policy %q", c.alg, c.burst, h.Get("RateLimit-Policy"))
			}
			got := fmt.Sprintf("%d r=%s limit=%s remaining=%s warning=%q", status, h.Get("RateLimit"), h.Get("X-RateLimit-Limit"),
				h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Warning"))
			if int(i) < len(c.want) && c.want[i] != "" && got != c.want[i] {
				t.Errorf("%v burst %d, request %d:\n got %s\nwant %s", c.alg, c.burst, i, got, c.want[i])
			}
		}
	}
}
