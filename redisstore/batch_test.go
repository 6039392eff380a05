package redisstore

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// goroutineID is the running goroutine's number, read from its stack
// header ("goroutine 42 [running]:").
func goroutineID() int {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = b[len("goroutine "):]
	id, _ := strconv.Atoi(string(b[:bytes.IndexByte(b, ' ')]))
	return id
}

// TestExecutorsParkAndExit: a batch that follows another within
// executorIdle runs on the executor of the one before, not on a new
// goroutine; every request is answered once; and executors left without
// work exit, so an idle batcher holds no goroutine.
func TestExecutorsParkAndExit(t *testing.T) {
	var mu sync.Mutex
	ran := map[int]int{} // executor goroutine → requests it ran
	gate := make(chan struct{})
	b := &batcher{maxBatch: 4, maxInFlight: 2, timeout: time.Minute,
		exec: func(_ context.Context, batch []*request, _ context.Context) {
			<-gate
			mu.Lock()
			ran[goroutineID()] += len(batch)
			mu.Unlock()
		}}
	before := runtime.NumGoroutine()

	// Round one: 10 requests while the executors are held, so that both
	// start and the rest queue behind them.
	round := func(n int) {
		rs := make([]*request, n)
		for i := range rs {
			rs[i] = getRequest(1)
			if b.submit(context.Background(), rs[i]) {
				t.Fatal("a request ran inline on a batcher without inline calls")
			}
		}
		close(gate)
		for i, r := range rs {
			select {
			case <-r.done:
			case <-time.After(10 * time.Second):
				t.Fatalf("request %d of %d not answered", i, n)
			}
			select {
			case <-r.done:
				t.Fatalf("request %d answered twice", i)
			default:
			}
			putRequest(r)
		}
	}
	round(10)
	mu.Lock()
	first := ran
	total := 0
	for _, n := range first {
		total += n
	}
	ran = map[int]int{}
	mu.Unlock()
	if total != 10 || len(first) > 2 {
		t.Fatalf("round one: %d requests on %d executors %v, want 10 on at most 2", total, len(first), first)
	}

	// Round two, at once: its batches go to the parked executors.
	gate = make(chan struct{})
	round(3)
	mu.Lock()
	for id := range ran {
		if _, ok := first[id]; !ok {
			t.Errorf("round two ran on goroutine %d, not on a parked executor of round one (%v)", id, first)
		}
	}
	mu.Unlock()

	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(executorIdle / 4)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines 10 s after the last batch, %d before the first: executors did not exit", n, before)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inFlight != 0 || b.idle != 0 || len(b.queue) != 0 {
		t.Errorf("idle batcher: inFlight %d, idle %d, queued %d; want 0, 0, 0", b.inFlight, b.idle, len(b.queue))
	}
}
