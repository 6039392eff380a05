package redisstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algorithm"
	"github.com/floodgate/floodgate/storetest"
)

// packed is the form earlier versions wrote: the fields as big-endian
// doubles, two or three of them.
func packed(fields ...int64) string {
	b := make([]byte, 8*len(fields))
	for i, f := range fields {
		binary.BigEndian.PutUint64(b[8*i:], math.Float64bits(float64(f)))
	}
	return string(b)
}

// TestStatesOfEarlierVersions writes each algorithm's state as earlier
// versions wrote it — packed without the window, or decimal text, or, for
// the token bucket and GCRA, packed with the window but without the
// expiry set — and requires the store to decide on it as package algorithm
// does on the same fields (W = 0 reads as the policy's window), then to
// write it back in the current form.
func TestStatesOfEarlierVersions(t *testing.T) {
	rdb := standaloneClient(t)
	clock := storetest.NewClock(storetest.Epoch.Add(90 * time.Second))
	s := newTestStore(t, rdb, WithClock(clock.Now))
	ctx := context.Background()
	now := clock.Now().UnixMicro()
	const sec = 1_000_000
	p := floodgate.Policy{Name: "old", Quota: 10, Window: time.Minute}
	start := now - now%(60*sec)
	for i, c := range []struct {
		a     floodgate.Algorithm
		value string
		state algorithm.State
		size  int // bytes once written back
	}{
		{floodgate.FixedWindow, packed(start, 7), algorithm.State{A: start, B: 7}, 24},
		{floodgate.FixedWindow, fmt.Sprintf("%d:%d", start, 7), algorithm.State{A: start, B: 7}, 24},
		{floodgate.SlidingWindowCounter, packed(start, 3, 8), algorithm.State{A: start, B: 3, C: 8}, 32},
		{floodgate.SlidingWindowCounter, fmt.Sprintf("%d:%d:%d", start, 3, 8), algorithm.State{A: start, B: 3, C: 8}, 32},
		{floodgate.TokenBucket, packed(now-5*sec, 9*60*sec), algorithm.State{A: now - 5*sec, B: 9 * 60 * sec}, 32},
		{floodgate.TokenBucket, packed(now-5*sec, 9*30*sec, 30*sec), algorithm.State{A: now - 5*sec, B: 9 * 30 * sec, W: 30 * sec}, 32},
		{floodgate.GCRA, packed(now+48*sec, 3, 10), algorithm.State{A: now + 48*sec, B: 3, C: 10}, 40},
		{floodgate.GCRA, packed(now+48*sec, 3), algorithm.State{A: now + 48*sec, B: 3}, 40},
		{floodgate.GCRA, packed(now+24*sec, 3, 10, 30*sec), algorithm.State{A: now + 24*sec, B: 3, C: 10, W: 30 * sec}, 40},
	} {
		p.Algorithm = c.a
		key := "k" + strconv.Itoa(i)
		rk := redisKey(s.prefix, tag(key, s.maxKeyLen), &p)
		if err := rdb.Set(ctx, rk, c.value, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		want := decideAlgorithm(c.a, c.state, now, p, 1)
		res := make([]floodgate.Result, 1)
		if err := s.Take(ctx, key, one, []floodgate.Policy{p}, res); err != nil {
			t.Fatal(err)
		}
		if got := res[0]; got.Allowed != want.Allowed || got.Remaining != want.Remaining ||
			got.ResetAfter != time.Duration(want.ResetAfter)*time.Microsecond || got.RetryAfter != time.Duration(want.RetryAfter)*time.Microsecond {
			t.Errorf("%v from %q: %+v, want %+v", c.a, c.value, got, want)
		}
		if v, err := rdb.Get(ctx, rk).Result(); err != nil || len(v) != c.size {
			t.Errorf("%v from %q: written back as %q (%v), want %d bytes", c.a, c.value, v, err, c.size)
		}
	}
	oldLog(t, rdb, s, now)
}

// oldLog: a sliding log whose total member is "n", as earlier versions
// named it, decides as the same entries do, and is renamed for its window.
func oldLog(t *testing.T, rdb *redis.Client, s *Store, now int64) {
	ctx := context.Background()
	p := floodgate.Policy{Name: "old", Algorithm: floodgate.SlidingWindowLog, Quota: 10, Window: time.Minute}
	params := algorithm.Params{Quota: 10, Capacity: 10, Window: p.Window.Microseconds()}
	rk := redisKey(s.prefix, tag("log", s.maxKeyLen), &p)
	var l algorithm.Log
	members := []redis.Z{{Score: -9, Member: "n"}}
	for i, cost := range []int64{4, 1, 4} {
		at := now - int64(50-10*i)*1_000_000
		l.Add(at, params, cost)
		name := strconv.FormatInt(at, 10)
		if cost != 1 {
			name += ":" + strconv.FormatInt(cost, 10)
		}
		members = append(members, redis.Z{Score: float64(at), Member: name})
	}
	if err := rdb.ZAdd(ctx, rk, members...).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(ctx, rk, time.Hour)
	want := l.Take(now, params, 2)
	res := make([]floodgate.Result, 1)
	if err := s.Take(ctx, "log", floodgate.Cost{Requests: 2}, []floodgate.Policy{p}, res); err != nil {
		t.Fatal(err)
	}
	if got := res[0]; got.Allowed != want.Allowed || got.Remaining != want.Remaining ||
		got.ResetAfter != time.Duration(want.ResetAfter)*time.Microsecond || got.RetryAfter != time.Duration(want.RetryAfter)*time.Microsecond {
		t.Errorf("sliding log from an earlier version: %+v, want %+v", got, want)
	}
	if score, err := rdb.ZScore(ctx, rk, "n60000000").Result(); err != nil || score != -9 {
		t.Errorf("total member n60000000: %v (%v), want -9 (the denied request spent nothing)", score, err)
	}
	if n, _ := rdb.ZCard(ctx, rk).Result(); n != 4 {
		t.Errorf("log holds %d members after the rename, want the total and 3 entries", n)
	}
}

// decideAlgorithm is package algorithm's decision for the O(1) algorithms.
func decideAlgorithm(a floodgate.Algorithm, s algorithm.State, now int64, p floodgate.Policy, cost int64) algorithm.Result {
	var r algorithm.Result
	ap := algorithm.Params{Quota: p.Quota, Capacity: p.Capacity(), Window: p.Window.Microseconds()}
	decideInPlace(a, &s, now, ap, cost, &r)
	return r
}

// decideInPlace is decideAlgorithm on state s, which it updates.
func decideInPlace(a floodgate.Algorithm, s *algorithm.State, now int64, p algorithm.Params, cost int64, r *algorithm.Result) {
	switch a {
	case floodgate.FixedWindow:
		algorithm.FixedWindow(s, now, p, cost, r)
	case floodgate.SlidingWindowCounter:
		algorithm.SlidingWindowCounter(s, now, p, cost, r)
	case floodgate.TokenBucket:
		algorithm.TokenBucket(s, now, p, cost, r)
	case floodgate.GCRA:
		algorithm.GCRA(s, now, p, cost, r)
	case floodgate.AnchoredWindow:
		algorithm.AnchoredWindow(s, now, p, cost, r)
	default: // no algorithm runs as another, here either
		panic(fmt.Sprintf("decideInPlace: no reference decision for algorithm %v", a))
	}
}
