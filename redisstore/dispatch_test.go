package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
)

// TestSingleMatchesSeveral: a request of one policy, which
// lua/dispatch.lua decides on a path of its own (single), answers as the
// general path (several) answers for the same policy in a request of two.
// For each algorithm the same requests — admissions, a peek, a cost over
// what remains, denials, then admissions again as the window moves on — go
// to one key as lone one-policy calls, and to another key within
// two-policy requests (the second policy a quota never reached) that are
// the first of two-request calls (the second a peek of a third key), at
// the same test times; every reply of the policy must match, and the
// sequence must both admit and deny.
func TestSingleMatchesSeveral(t *testing.T) {
	rdb := standaloneClient(t)
	ctx := context.Background()
	if err := rdb.FunctionLoadReplace(ctx, library).Err(); err != nil {
		t.Fatal(err)
	}
	prefix := newPrefix(t, rdb)
	steps := []struct {
		after time.Duration
		cost  int64
	}{
		{0, 1}, {time.Millisecond, 2}, {0, 0}, {3 * time.Millisecond, 5}, {0, 1}, {0, 1},
		{20 * time.Millisecond, 1}, {0, 0}, {200 * time.Millisecond, 2}, {0, 3}, {time.Second, 1},
	}
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro()
	for _, a := range floodgate.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			p := floodgate.Policy{Name: "p", Algorithm: a, Quota: 4, Window: 100 * time.Millisecond}
			wide := floodgate.Policy{Name: "wide", Algorithm: floodgate.FixedWindow, Quota: 1 << 40, Window: time.Hour}
			peek := []floodgate.Policy{{Name: "q", Algorithm: floodgate.GCRA, Quota: 1, Window: time.Second}}
			lone, paired, other := a.String()+"-lone", a.String()+"-paired", a.String()+"-other"
			now, admitted, denied := start, 0, 0
			for i, st := range steps {
				now += st.after.Microseconds()
				got := call(t, rdb, request1(prefix, lone, []floodgate.Policy{p}, now, st.cost))
				want := call(t, rdb, request1(prefix, paired, []floodgate.Policy{p, wide}, now, st.cost),
					request1(prefix, other, peek, now, 0))
				if len(got) != 5 || len(want) != 15 || [5]int64(got) != [5]int64(want[:5]) {
					t.Fatalf("step %d (cost %d): alone %v, beside another policy %v", i, st.cost, got, want[:5])
				}
				if st.cost > 0 && got[0] == 1 {
					admitted++
				} else if got[0] == 0 {
					denied++
				}
			}
			if admitted == 0 || denied == 0 {
				t.Errorf("%d admitted, %d denied: the steps must do both", admitted, denied)
			}
		})
	}
}

// request1 is the request of one Take of cost for key at now (µs, or -1
// for the server's TIME).
func request1(prefix, key string, ps []floodgate.Policy, now, cost int64) *request {
	r := getRequest(len(ps))
	for i := range ps {
		r.keys[i] = redisKey(prefix, key, &ps[i])
	}
	r.encode(now, ps, floodgate.Cost{Requests: cost})
	return r
}

// call sends rs in one FCALL, with the TTL slack of a test clock (now is
// the test's, not the server's), and returns the reply.
func call(t *testing.T, rdb *redis.Client, rs ...*request) []int64 {
	t.Helper()
	cmd := evalCmd(context.Background(), "fcall", functionNameArg, testClockSlack.Milliseconds(), rs)
	vals, err := cmd, rdb.Process(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	return vals.Val()
}
