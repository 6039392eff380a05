package redisstore

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
)

// snapshot reads, in one script, the server's time (µs) and each key's
// absolute expiry (PEXPIRETIME, ms; -1 for none, -2 for no key) and value.
var snapshot = redis.NewScript(`
local t = redis.call('TIME')
local out = { tonumber(t[1]) * 1000000 + tonumber(t[2]) }
for _, k in ipairs(KEYS) do
  out[#out + 1] = redis.call('PEXPIRETIME', k)
  out[#out + 1] = redis.call('GET', k) or ''
end
return out
`)

// needed is the time (µs) from which a bucket state v (as stored) equals
// a full bucket, q the quota of the policy that wrote it, with the
// expiry the state says its key was given (0 when it does not say).
func needed(t *testing.T, a floodgate.Algorithm, v string, q int64) (need, e int64) {
	t.Helper()
	f := make([]int64, len(v)/8)
	for i := range f {
		x := math.Float64frombits(binary.BigEndian.Uint64([]byte(v[8*i:])))
		if x != math.Trunc(x) {
			t.Fatalf("state field %v is no integer", x)
		}
		f[i] = int64(x)
	}
	switch {
	case a == floodgate.TokenBucket && len(f) == 4: // A, B, E, W
		return f[0] + (f[1]+q-1)/q, f[2]
	case a == floodgate.TokenBucket && len(f) == 3: // A, B, W
		return f[0] + (f[1]+q-1)/q, 0
	case a == floodgate.GCRA && len(f) == 5: // A, B, C, W, E
		return f[0] + min(f[1], 1), f[4]
	case a == floodgate.GCRA && len(f) == 4: // A, B, C, W
		return f[0] + min(f[1], 1), 0
	}
	t.Fatalf("%v state of %d bytes", a, len(v))
	return 0, 0
}

// TestBucketKeysOutliveTheirState: under the server's clock, no token
// bucket or GCRA key may expire before its state equals a full bucket (a
// key that did would admit more than the algorithm allows). Seeded random
// traffic — policies whose quota, burst and window change between calls,
// one or two policies per request, peeks, costs over what remains, calls of
// several requests for the same keys, pauses of up to 20 ms against
// windows of 1 ms to 2 s — goes to a few keys, and after every call one
// script reads the server's time and each key's expiry and state: the state's
// expiry E must cover the time the state needs, and the key's expiry
// (PEXPIRETIME, to the millisecond it is counted in) must cover E.
func TestBucketKeysOutliveTheirState(t *testing.T) {
	rdb := standaloneClient(t)
	ctx := context.Background()
	if err := rdb.FunctionLoadReplace(ctx, library).Err(); err != nil {
		t.Fatal(err)
	}
	prefix := newPrefix(t, rdb)
	rng := rand.New(rand.NewPCG(11, 3))
	algs := []floodgate.Algorithm{floodgate.TokenBucket, floodgate.GCRA}
	quotas := []int64{1, 3, 10, 1000}
	windows := []time.Duration{time.Millisecond, 5 * time.Millisecond, 50 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second}
	pauses := []time.Duration{0, 0, 0, 500 * time.Microsecond, 3 * time.Millisecond, 20 * time.Millisecond}
	type keyOf struct {
		key  string
		name string
		alg  floodgate.Algorithm
	}
	writer := map[keyOf]int64{} // quota of the policy that last wrote each key
	var all []keyOf
	for _, k := range []string{"a", "b"} {
		for _, n := range []string{"p0", "p1"} {
			for _, a := range algs {
				all = append(all, keyOf{k, n, a})
			}
		}
	}
	rkey := func(k keyOf) string {
		p := floodgate.Policy{Name: k.name, Algorithm: k.alg}
		return redisKey(prefix, k.key, &p)
	}
	rkeys := make([]string, len(all))
	for i, k := range all {
		rkeys[i] = rkey(k)
	}
	checked, kept := 0, 0
	for step := 0; step < 600; step++ {
		time.Sleep(pauses[rng.IntN(len(pauses))])
		type op struct {
			key      string
			policies []floodgate.Policy
			cost     int64
		}
		ops := make([]op, 1+rng.IntN(3))
		reqs := make([]*request, len(ops))
		for i := range ops {
			o := op{key: []string{"a", "b"}[rng.IntN(2)]}
			names := []string{"p0", "p1"}
			rng.Shuffle(2, func(i, j int) { names[i], names[j] = names[j], names[i] })
			for _, n := range names[:1+rng.IntN(2)] {
				p := floodgate.Policy{Name: n, Algorithm: algs[rng.IntN(2)], Quota: quotas[rng.IntN(len(quotas))], Window: windows[rng.IntN(len(windows))]}
				if rng.IntN(2) == 0 {
					p.Burst = max(1, p.Quota*int64(rng.IntN(3))+int64(rng.IntN(3)))
				}
				o.policies = append(o.policies, p)
			}
			c := int64(1 << 40)
			for _, p := range o.policies {
				c = min(c, p.Capacity())
			}
			o.cost = rng.Int64N(min(c, 50) + 1)
			r := getRequest(len(o.policies))
			for j := range o.policies {
				r.keys[j] = redisKey(prefix, o.key, &o.policies[j])
			}
			r.encode(-1, o.policies, floodgate.Cost{Requests: o.cost})
			ops[i], reqs[i] = o, r
		}
		cmd := evalCmd(ctx, "fcall", functionNameArg, 0, reqs)
		if err := rdb.Process(ctx, cmd); err != nil {
			t.Fatal(err)
		}
		// Who wrote what: the replies, in order.
		out := cmd.Val()
		for _, o := range ops {
			ok := true
			for j := range o.policies {
				ok = ok && out[5*j] == 1
			}
			out = out[5*len(o.policies):]
			if ok && o.cost > 0 {
				for _, p := range o.policies {
					writer[keyOf{o.key, p.Name, p.Algorithm}] = p.Quota
				}
			}
		}
		for _, r := range reqs {
			putRequest(r)
		}
		snap, err := snapshot.Run(ctx, rdb, rkeys).Slice()
		if err != nil {
			t.Fatal(err)
		}
		now := snap[0].(int64)
		for i, k := range all {
			pexp, v := snap[1+2*i].(int64), snap[2+2*i].(string)
			if v == "" {
				continue
			}
			need, e := needed(t, k.alg, v, writer[k])
			if need <= now {
				continue // full already
			}
			checked++
			if e != 0 && e < need {
				t.Fatalf("step %d: %v key %s: state needs until %d, its expiry E is %d", step, k.alg, rkeys[i], need, e)
			}
			// The key lives through the millisecond of its expiry.
			until := (pexp + 1) * 1000
			if pexp < 0 || until < max(need, e) {
				t.Fatalf("step %d: %v key %s: state needs %d µs more, the key expires at %d ms (E %d µs from now; now %d, %d bytes, writer q %d)", step, k.alg, rkeys[i], need-now, pexp, e-now, now, len(v), writer[k])
			}
			if e > need {
				kept++
			}
		}
	}
	if checked < 300 || kept < 50 {
		t.Errorf("%d states checked while they differed from a full bucket, %d with headroom: too few", checked, kept)
	}
}
