package main

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/bench/internal/redisload"
	"github.com/floodgate/floodgate/redisstore"
)

type cell struct {
	target int
	alg    floodgate.Algorithm
	conc   int
}

// sample is one measurement of one cell.
type sample struct {
	perSec    float64 // decisions/s
	redisUS   float64 // Redis CPU µs per decision, all masters
	perCall   float64 // decisions per script call
	trips     float64 // round trips per decision
	clientUS  float64 // this process's CPU µs per decision
	median    time.Duration
	shards    []shard
	decisions int64
}

// shard is one master's part of a sample.
type shard struct {
	addr    string
	share   float64 // of the decisions, by the keys it holds
	cpuUS   float64 // its CPU µs per decision it served
	busy    float64 // its CPU seconds per second of the run
	perCall float64
}

// measure runs one cell's load on a fresh key prefix and reads what it cost.
func measure(c *redisload.Client, a floodgate.Algorithm, n int, o options) (sample, error) {
	ctx := context.Background()
	prefix := fmt.Sprintf("cap:%d:", time.Now().UnixNano())
	take, err := floodgateTake(c, prefix, a, o)
	if a == ratelimit {
		take = ratelimitTake(c, prefix, o.quota)
	}
	if err != nil {
		return sample{}, err
	}
	keys := make([]string, o.keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	take(ctx, keys[0]) // loads the code, outside the measurement
	before, err := redisload.Masters(ctx, c.UniversalClient)
	if err != nil {
		return sample{}, err
	}
	trips0, cpu0 := c.Trips(), processCPU()
	t := redisload.Load{Concurrency: n, Duration: o.duration, Keys: keys}.Run(take)
	trips, cpu := c.Trips()-trips0, processCPU()-cpu0
	after, err := redisload.Masters(ctx, c.UniversalClient)
	if err != nil {
		return sample{}, err
	}
	if t.Errors > 0 {
		return sample{}, fmt.Errorf("%d of %d decisions failed, first: %w", t.Errors, t.Decisions, t.FirstErr)
	}
	shares, err := keyShares(ctx, c.UniversalClient, keys)
	if err != nil {
		return sample{}, err
	}
	return summarize(t, before, after, shares, trips, cpu), nil
}

// floodgateTake decides through floodgate.Limiter over redisstore, as an
// application or the daemon does; -batch 1 sends each decision alone.
func floodgateTake(c *redisload.Client, prefix string, a floodgate.Algorithm, o options) (redisload.Take, error) {
	if a == ratelimit {
		return nil, nil
	}
	st, err := redisstore.New(c.UniversalClient, redisstore.WithPrefix(prefix),
		redisstore.WithTimeout(time.Second), redisstore.WithBatching(o.batch, o.inflight))
	if err != nil {
		return nil, err
	}
	lim, err := floodgate.NewLimiter(st, []floodgate.Policy{{
		Name: "api", Algorithm: a, Quota: o.quota, Window: time.Second, Burst: burst(a),
	}})
	if err != nil {
		return nil, err
	}
	switch {
	case o.settle:
		return settleTake(lim), nil
	case o.twice:
		return func(ctx context.Context, key string) (bool, error) {
			if d, err := lim.Take(ctx, key, 1); err != nil || !d.Allowed {
				return false, err
			}
			d, err := lim.Take(ctx, key, 1)
			return d.Allowed, err
		}, nil
	}
	return func(ctx context.Context, key string) (bool, error) {
		d, err := lim.Take(ctx, key, 1)
		return d.Allowed, err
	}, nil
}

// settleTake reserves 2 and settles at 1 or 3 in turn: a refund, then a
// post-charge, so that the mean actual cost is the estimate.
func settleTake(lim *floodgate.Limiter) redisload.Take {
	var n atomic.Int64
	return func(ctx context.Context, key string) (bool, error) {
		r, err := lim.Reserve(ctx, key, floodgate.Cost{Requests: 2})
		if err != nil || !r.Decision.Allowed {
			return false, err
		}
		_, err = r.Settle(ctx, floodgate.Cost{Requests: 1 + 2*(n.Add(1)%2)})
		return true, err
	}
}

// burst is the policy's Burst: only the bucket algorithms take one.
func burst(a floodgate.Algorithm) int64 {
	if a == floodgate.TokenBucket || a == floodgate.GCRA {
		return 100
	}
	return 0
}

func summarize(t redisload.Tally, before, after []redisload.Node, shares map[string]float64, trips int64, cpu time.Duration) sample {
	d := float64(t.Decisions)
	s := sample{
		perSec: d / t.Elapsed.Seconds(), trips: float64(trips) / d,
		clientUS: float64(cpu.Microseconds()) / d, median: t.Median, decisions: t.Decisions,
	}
	var calls int64
	for i, a := range after {
		n := a.Sub(before[i])
		calls += n.Calls
		s.redisUS += n.CPU * 1e6 / d
		sh := shard{addr: a.Addr, share: shares[a.Addr], busy: n.CPU / t.Elapsed.Seconds()}
		if served := d * sh.share; served > 0 {
			sh.cpuUS = n.CPU * 1e6 / served
		}
		if n.Calls > 0 {
			sh.perCall = d * sh.share / float64(n.Calls)
		}
		s.shards = append(s.shards, sh)
	}
	if calls > 0 {
		s.perCall = d / float64(calls)
	}
	return s
}

// keyShares is the part of keys each master holds; the load walks every key
// equally often, so it is also the part of the decisions each serves.
func keyShares(ctx context.Context, c redis.UniversalClient, keys []string) (map[string]float64, error) {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return map[string]float64{c.(*redis.Client).Options().Addr: 1}, nil
	}
	shares := map[string]float64{}
	for _, k := range keys {
		m, err := cc.MasterForKey(ctx, "{"+k+"}")
		if err != nil {
			return nil, err
		}
		shares[m.Options().Addr] += 1 / float64(len(keys))
	}
	return shares, nil
}

// processCPU is the user and system CPU this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}
