package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/rlqs"
	"github.com/floodgate/floodgate/rlqs/rlqsclient"
)

// HotResult is what a real-time run measured.
type HotResult struct {
	DecisionsPerSec, AdmittedPerSec, CallsPerSec float64
	Worst                                        float64 // over whole windows
	// LateP99 and LateMax are how much later than the interval a client's
	// report went out (the gap between two reports, less the interval),
	// over every report of every client: guarantee (c) of docs/RLQS.md.
	LateP99, LateMax time.Duration
}

// Hot runs n clients for one hot bucket against one server on Redis, for
// d of real time. Each client decides in a goroutine of its own, rate/n
// decisions a second in batches every 2 ms, or as fast as it can when
// rate is 0, and reports every interval from a goroutine of its own.
func Hot(addr string, n int, quota int64, d, interval time.Duration, slack float64, rate float64) (HotResult, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	mem, err := redisstore.New(rdb, redisstore.WithTimeout(time.Second), redisstore.WithPrefix(fmt.Sprintf("rlqssim-%d:", time.Now().UnixNano())))
	if err != nil {
		return HotResult{}, err
	}
	store := &counting{Store: mem}
	conn, stop, err := serve(store, quota, rlqs.Options{Interval: interval, Slack: slack})
	if err != nil {
		return HotResult{}, err
	}
	defer stop()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	begin := time.Now()
	base := begin.Truncate(time.Second) // the store's windows are aligned to the epoch
	secs := int(d/time.Second) + 2
	var (
		mu        sync.Mutex
		admitted  = make([]int64, secs) // per window of the store since base
		decisions int64
		late      []time.Duration
		wg, rg    sync.WaitGroup
	)
	for range n {
		c, err := rlqsclient.New(conn, rlqsclient.Settings{Domain: "envoy", Interval: interval}, nil)
		if err != nil {
			return HotResult{}, err
		}
		rg.Go(func() {
			l := reportEvery(ctx, c, interval)
			mu.Lock()
			defer mu.Unlock()
			late = append(late, l...)
		})
		wg.Go(func() {
			local, count := decide(c, begin, base, d, secs, rate/float64(n))
			mu.Lock()
			defer mu.Unlock()
			decisions += count
			for i, v := range local {
				admitted[i] += v
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin).Seconds()
	cancel()
	rg.Wait()
	r := HotResult{DecisionsPerSec: float64(decisions) / elapsed, CallsPerSec: float64(store.calls.Load()) / elapsed}
	end := int(begin.Add(d).Sub(base) / time.Second)
	var total int64
	for i, a := range admitted {
		total += a
		if i > 0 && i < end { // whole windows only: the first and the last are cut
			r.Worst = max(r.Worst, float64(a)/float64(quota))
		}
	}
	r.AdmittedPerSec = float64(total) / elapsed
	if len(late) > 0 {
		slices.Sort(late)
		r.LateP99, r.LateMax = late[len(late)*99/100], late[len(late)-1]
	}
	return r, nil
}

// decide asks c for the hot bucket until d has passed since begin, perSec
// decisions a second (0: as fast as it can), and returns the admissions
// per window since base and the decisions made.
func decide(c *rlqsclient.Client, begin, base time.Time, d time.Duration, secs int, perSec float64) ([]int64, int64) {
	const tick = 2 * time.Millisecond
	batch := 256
	if perSec > 0 {
		batch = max(1, int(perSec*tick.Seconds()))
	}
	local := make([]int64, secs)
	var count int64
	next := begin
	for {
		now := time.Now()
		if now.Sub(begin) >= d {
			return local, count
		}
		if perSec > 0 && now.Before(next) {
			time.Sleep(next.Sub(now))
			continue
		}
		next = next.Add(tick)
		// A batch between clock reads: a clock read costs more than a decision.
		w := int(now.Sub(base) / time.Second)
		for range batch {
			if c.Allow(bucket) {
				local[w]++
			}
		}
		count += int64(batch)
		if perSec == 0 {
			time.Sleep(0) // yield: the server's and the reports' goroutines share the cores
		}
	}
}

// reportEvery does what Client.Run does (a report every interval, and at
// once for a new bucket) and returns how late each report after the first
// went out.
func reportEvery(ctx context.Context, c *rlqsclient.Client, interval time.Duration) []time.Duration {
	var late []time.Duration
	var last time.Time
	t := time.NewTicker(interval)
	defer t.Stop()
	defer c.Close()
	c.Allow(bucket) // subscribe: DENY_ALL until the first assignment
	for {
		now := time.Now()
		if !last.IsZero() {
			late = append(late, max(0, now.Sub(last)-interval))
		}
		last = now
		_ = c.Report(ctx) // a failed report reopens the stream next time
		select {
		case <-ctx.Done():
			return late
		case <-t.C:
		}
	}
}
