package main

import (
	"context"
	"fmt"
	"runtime"
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
}

// Hot runs n clients, each deciding for one hot bucket as fast as it can
// in a goroutine of its own and reporting every interval, against one
// server on Redis, for d of real time.
func Hot(addr string, n int, quota int64, d, interval time.Duration, slack float64) (HotResult, error) {
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
	secs := int(d/time.Second) + 2
	var mu sync.Mutex
	admitted := make([]int64, secs) // per wall-clock second since begin's second
	var decisions int64
	var wg sync.WaitGroup
	for range n {
		c, err := rlqsclient.New(conn, rlqsclient.Settings{Domain: "envoy", Interval: interval}, nil)
		if err != nil {
			return HotResult{}, err
		}
		go c.Run(ctx)
		wg.Go(func() {
			local := make([]int64, secs)
			var count int64
			base := begin.Truncate(time.Second)
			for {
				now := time.Now()
				if now.Sub(begin) >= d {
					break
				}
				// A batch between clock reads: a clock read costs more than a decision.
				w := int(now.Sub(base) / time.Second)
				for range 256 {
					if c.Allow(bucket) {
						local[w]++
					}
				}
				count += 256
				runtime.Gosched() // the server's and the reports' goroutines share the cores
			}
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
	r := HotResult{DecisionsPerSec: float64(decisions) / elapsed, CallsPerSec: float64(store.calls.Load()) / elapsed}
	var total int64
	for i, a := range admitted {
		total += a
		if i > 0 && i < len(admitted)-1 { // whole windows only
			r.Worst = max(r.Worst, float64(a)/float64(quota))
		}
	}
	r.AdmittedPerSec = float64(total) / elapsed
	return r, nil
}
