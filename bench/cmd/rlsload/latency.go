package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxOutstanding bounds the calls of an open-loop run waiting for their
// answer: a server that falls behind has the calls beyond it counted as
// late, not piled up without end.
const maxOutstanding = 4096

// openLoop offers rate calls a second for dur, each at its own scheduled
// time whatever the answers before it (so a slow answer cannot hold the
// next calls back and hide its cost), spread round-robin over keys, and
// returns each answered call's latency from its scheduled time, sorted;
// the errors; and the calls not sent because maxOutstanding were waiting.
func openLoop(call func(ctx context.Context, key string) error, keys, rate int, dur time.Duration) (lat []time.Duration, errs, late int64) {
	names := make([]string, keys)
	for i := range names {
		names[i] = "k" + strconv.Itoa(i)
	}
	var mu sync.Mutex
	var bad, waiting atomic.Int64
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if at.Sub(start) >= dur {
			break
		}
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		if waiting.Load() >= maxOutstanding {
			late++
			continue
		}
		waiting.Add(1)
		wg.Add(1)
		go func(key string) {
			defer wg.Done()
			defer waiting.Add(-1)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := call(ctx, key); err != nil {
				bad.Add(1)
				return
			}
			d := time.Since(at)
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		}(names[i%keys])
	}
	wg.Wait()
	slices.Sort(lat)
	return lat, bad.Load(), late
}

// quantile is the q-quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// latencyLine is one open-loop run's result line.
func latencyLine(label string, keys, rate int, dur time.Duration, lat []time.Duration, errs, late int64, cpuPer float64) string {
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	return fmt.Sprintf("%s\t%d keys\t%d offered/s\t%.0f answered/s\t%.0f µs p50\t%.0f µs p99\t%.0f µs p99.9\t%d errors\t%d late\t%.1f µs server CPU/decision",
		label, keys, rate, float64(len(lat))/dur.Seconds(), us(quantile(lat, 0.5)), us(quantile(lat, 0.99)), us(quantile(lat, 0.999)), errs, late, cpuPer)
}
