package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algorithm"
	"github.com/floodgate/floodgate/storetest"
)

// reference is package algorithm applied as Store's contract says, with
// states never dropped: what the Redis store decides while the test clock
// leaves its keys alive (under WithClock every TTL is a minute longer than
// the state needs, in the server's time, and a test of a few seconds never
// reaches it), whatever the policy that wrote a state.
type reference struct {
	states map[string]*algorithm.State
	logs   map[string]*algorithm.Log
}

func (m *reference) take(key string, now int64, cost floodgate.Cost, ps []floodgate.Policy) []floodgate.Result {
	res := make([]floodgate.Result, len(ps))
	next := make([]algorithm.State, len(ps))
	peek, ok := cost.IsPeek(), true
	for i := range ps {
		p := &ps[i]
		id := key + ":" + p.Name + ":" + p.Algorithm.String()
		ap := algorithm.Params{Quota: p.Quota, Capacity: p.Capacity(), Window: p.Window.Microseconds()}
		c := cost.Of(p.Unit)
		var r algorithm.Result
		if p.Algorithm == floodgate.SlidingWindowLog {
			if m.logs[id] == nil {
				m.logs[id] = new(algorithm.Log)
			}
			r = m.logs[id].Take(now, ap, c)
		} else {
			if m.states[id] != nil {
				next[i] = *m.states[id]
			}
			decideInPlace(p.Algorithm, &next[i], now, ap, c, &r)
		}
		if c == 0 && !peek {
			r.Allowed, r.RetryAfter = true, 0
		}
		ok = ok && r.Allowed
		res[i] = floodgate.Result{Allowed: r.Allowed, Remaining: r.Remaining, ResetAfter: time.Duration(r.ResetAfter) * time.Microsecond,
			RetryAfter: time.Duration(r.RetryAfter) * time.Microsecond, FullAfter: time.Duration(r.Full) * time.Microsecond}
	}
	for i := range ps {
		p := &ps[i]
		c := cost.Of(p.Unit)
		if !ok {
			if res[i].Allowed {
				res[i].Remaining += c
			}
			continue
		}
		if c == 0 {
			continue
		}
		id := key + ":" + p.Name + ":" + p.Algorithm.String()
		if p.Algorithm == floodgate.SlidingWindowLog {
			m.logs[id].Add(now, algorithm.Params{Quota: p.Quota, Capacity: p.Capacity(), Window: p.Window.Microseconds()}, c)
		} else {
			st := next[i]
			m.states[id] = &st
		}
	}
	return res
}

// TestDifferentialAlgorithm plays seeded random traffic on the Redis store's
// script and on package algorithm (reference), at the same test times, and
// requires every decision to match field for field. The traffic mixes what the
// algorithms' special cases turn on: policies whose quota, burst or window
// change between calls under the same name, one to three policies per
// request (mixed algorithms and units), peeks, costs above what remains,
// a clock that steps back, long idle gaps, and calls carrying several
// requests, some for the same key, which the script decides in order (the
// short path for one-policy requests, the general one for the others).
func TestDifferentialAlgorithm(t *testing.T) {
	rdb := standaloneClient(t)
	ctx := context.Background()
	if err := rdb.FunctionLoadReplace(ctx, library).Err(); err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			prefix := newPrefix(t, rdb)
			clock := storetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			mem := &reference{states: map[string]*algorithm.State{}, logs: map[string]*algorithm.Log{}}
			rng := rand.New(rand.NewPCG(seed, 7))
			// Every algorithm, the buckets twice: their special cases are the most.
			algs := append(floodgate.Algorithms(), floodgate.TokenBucket, floodgate.GCRA)
			quotas := []int64{1, 3, 10, 1000}
			windows := []time.Duration{time.Millisecond, 7 * time.Millisecond, 250 * time.Millisecond, time.Second, time.Minute, time.Hour}
			steps := []time.Duration{0, 0, time.Microsecond, 333 * time.Microsecond, time.Millisecond, 30 * time.Millisecond,
				400 * time.Millisecond, 1100 * time.Millisecond, 59 * time.Second, time.Hour,
				-time.Millisecond, -2 * time.Second}
			policy := func(name string, a floodgate.Algorithm) floodgate.Policy {
				p := floodgate.Policy{Name: name, Algorithm: a, Quota: quotas[rng.IntN(len(quotas))],
					Window: windows[rng.IntN(len(windows))], Unit: floodgate.Unit(rng.IntN(2))}
				if (a == floodgate.TokenBucket || a == floodgate.GCRA) && rng.IntN(2) == 0 {
					p.Burst = max(1, p.Quota*int64(rng.IntN(3))+int64(rng.IntN(3)))
				}
				return p
			}
			type op struct {
				key      string
				policies []floodgate.Policy
				cost     floodgate.Cost
			}
			admitted, denied := 0, 0
			for step := 0; step < 1500; step++ {
				clock.Advance(steps[rng.IntN(len(steps))])
				// One to four requests in one script call, at one instant.
				ops := make([]op, 1+rng.IntN(4))
				for i := range ops {
					n := 1 + rng.IntN(3)
					if rng.IntN(2) == 0 {
						n = 1
					}
					o := op{key: fmt.Sprint("k", rng.IntN(3))}
					used := map[string]bool{}
					for len(o.policies) < n {
						name, a := fmt.Sprint("p", rng.IntN(3)), algs[rng.IntN(len(algs))]
						if used[name] {
							continue
						}
						used[name] = true
						o.policies = append(o.policies, policy(name, a))
					}
					capOf := func(u floodgate.Unit) int64 {
						c := int64(1 << 62)
						for _, p := range o.policies {
							if p.Unit == u {
								c = min(c, p.Capacity())
							}
						}
						return min(c, 1200)
					}
					o.cost = floodgate.Cost{Requests: rng.Int64N(capOf(floodgate.Requests) + 1),
						ContentBytes: rng.Int64N(capOf(floodgate.ContentBytes) + 1)}
					charged := false
					for _, p := range o.policies {
						charged = charged || o.cost.Of(p.Unit) > 0
					}
					if !charged || rng.IntN(6) == 0 {
						// A true peek: a cost no policy is charged goes through
						// Store.Take, which mends the script's reading of it.
						o.cost = floodgate.Cost{}
					}
					ops[i] = o
				}
				now := clock.Now().UnixMicro()
				reqs := make([]*request, len(ops))
				for i, o := range ops {
					r := getRequest(len(o.policies))
					for j := range o.policies {
						r.keys[j] = redisKey(prefix, o.key, &o.policies[j])
					}
					r.encode(now, o.policies, o.cost)
					reqs[i] = r
				}
				got := call(t, rdb, reqs...)
				for i, o := range ops {
					res := mem.take(o.key, now, o.cost, o.policies)
					for j, w := range res {
						if len(got) < 5 {
							t.Fatalf("step %d: short reply", step)
						}
						g := got[:5]
						got = got[5:]
						want := [5]int64{0, w.Remaining, w.ResetAfter.Microseconds(), w.RetryAfter.Microseconds(), w.FullAfter.Microseconds()}
						if w.Allowed {
							want[0] = 1
						}
						if [5]int64(g) != want {
							t.Fatalf("step %d request %d (key %s, cost %+v) policy %+v:\n redis     %v\n algorithm %v\n request %+v",
								step, i, o.key, o.cost, o.policies[j], g, want, o.policies)
						}
						if o.cost.Of(o.policies[j].Unit) > 0 {
							if w.Allowed {
								admitted++
							} else {
								denied++
							}
						}
					}
				}
				for _, r := range reqs {
					putRequest(r)
				}
			}
			if admitted < 300 || denied < 150 {
				t.Errorf("%d admitted, %d denied: the traffic must do plenty of both", admitted, denied)
			}
		})
	}
}
