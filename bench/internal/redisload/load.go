package redisload

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Take decides one request for key: admitted or not, or an error.
type Take func(ctx context.Context, key string) (bool, error)

// Load is a closed-loop workload: Concurrency goroutines, each calling Take
// back to back over Keys from its own offset, until Duration has passed or
// Stop is closed. A call in flight then is finished, never cancelled, so the
// tally holds every decision Redis made.
type Load struct {
	Concurrency int
	Duration    time.Duration
	Keys        []string
	Stop        <-chan struct{} // optional
}

// Tally is what a Load did.
type Tally struct {
	Decisions, Admitted, Errors int64
	// PerKey[i] counts the admissions of Keys[i].
	PerKey []int64
	// Elapsed is the wall time of the run.
	Elapsed time.Duration
	// Median is the median latency of one Take.
	Median time.Duration
	// FirstErr is the first error seen, if any.
	FirstErr error
}

// Run runs l and tallies it.
func (l Load) Run(take Take) Tally {
	var done atomic.Bool
	defer l.watch(&done)()
	ctx := context.Background()
	t := Tally{PerKey: make([]int64, len(l.Keys))}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		wg        sync.WaitGroup
		dec, adm  atomic.Int64
		errs      atomic.Int64
		firstErr  atomic.Pointer[error]
	)
	start := time.Now()
	for g := range l.Concurrency {
		wg.Go(func() {
			var lat []time.Duration
			i := g * len(l.Keys) / l.Concurrency
			for !done.Load() {
				i = (i + 1) % len(l.Keys)
				t0 := time.Now()
				ok, err := take(ctx, l.Keys[i])
				lat = append(lat, time.Since(t0))
				dec.Add(1)
				switch {
				case err != nil:
					errs.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				case ok:
					adm.Add(1)
					atomic.AddInt64(&t.PerKey[i], 1)
				}
			}
			mu.Lock()
			latencies = append(latencies, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Elapsed = time.Since(start)
	t.Decisions, t.Admitted, t.Errors = dec.Load(), adm.Load(), errs.Load()
	if p := firstErr.Load(); p != nil {
		t.FirstErr = *p
	}
	if len(latencies) > 0 {
		slices.Sort(latencies)
		t.Median = latencies[len(latencies)/2]
	}
	return t
}

// watch sets done once Duration has passed or Stop is closed; the function
// it returns stops watching.
func (l Load) watch(done *atomic.Bool) (stop func()) {
	timer := time.AfterFunc(l.Duration, func() { done.Store(true) })
	finished := make(chan struct{})
	if l.Stop != nil {
		go func() {
			select {
			case <-l.Stop:
				done.Store(true)
			case <-finished:
			}
		}()
	}
	return func() { timer.Stop(); close(finished) }
}
