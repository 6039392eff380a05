package floodgate_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/storetest"
)

// TestBreakerStates: N consecutive failures open it (N-1 do not, and a
// success ends a run); open, no call asks the store until the cooldown
// has passed; then one probe at a time; the probe's failure opens it
// again, its success closes it; each transition is reported once.
func TestBreakerStates(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	var moves []string
	var mu sync.Mutex
	br := floodgate.NewBreaker(floodgate.BreakerConfig{Threshold: 3, Cooldown: time.Second, Now: clock.Now,
		OnChange: func(from, to floodgate.BreakerState) {
			mu.Lock()
			moves = append(moves, from.String()+">"+to.String())
			mu.Unlock()
		}})
	b := &brokenStore{Store: newMemory(t, clock.Now)}
	b.broken.Store(true)
	policies := []floodgate.Policy{{Name: "p", Algorithm: floodgate.FixedWindow, Quota: 100, Window: time.Minute}}
	l, _ := floodgate.NewLimiter(b, policies, floodgate.WithBreaker(br), floodgate.WithLogger(slog.New(slog.DiscardHandler)))
	ctx := context.Background()
	take := func() error { _, err := l.Take(ctx, "k", 1); return err }

	take()
	take()
	b.broken.Store(false)
	take() // a success ends the run of two
	b.broken.Store(true)
	take()
	take()
	if br.State() != floodgate.BreakerClosed || b.calls.Load() != 5 {
		t.Fatalf("after 2+2 failures apart: %v, %d calls", br.State(), b.calls.Load())
	}
	take() // the third in a row
	if br.State() != floodgate.BreakerOpen {
		t.Fatalf("after 3 in a row: %v", br.State())
	}
	for range 10 {
		if err := take(); !errors.Is(err, floodgate.ErrStoreUnavailable) {
			t.Fatalf("open: %v", err)
		}
	}
	if b.calls.Load() != 6 {
		t.Fatalf("open breaker let %d calls through", b.calls.Load()-6)
	}
	clock.Advance(time.Second)
	take() // the probe fails
	if br.State() != floodgate.BreakerOpen || b.calls.Load() != 7 {
		t.Fatalf("after a failed probe: %v, %d calls", br.State(), b.calls.Load())
	}
	clock.Advance(time.Second)
	b.broken.Store(false)
	if err := take(); err != nil || br.State() != floodgate.BreakerClosed {
		t.Fatalf("after a good probe: %v %v", err, br.State())
	}
	want := []string{"closed>open", "open>half-open", "half-open>open", "open>half-open", "half-open>closed"}
	if !slices.Equal(moves, want) {
		t.Fatalf("transitions %v, want %v", moves, want)
	}
}

// TestBreakerOneProbe: against a blackholed Redis (it accepts connections
// and never answers), once the breaker is open and its cooldown over,
// ten concurrent decisions send one probe to the store; the nine others
// answer by the failure mode while the probe still waits for its
// timeout, and the listener receives one connection.
func TestBreakerOneProbe(t *testing.T) {
	hole := newBlackhole(t)
	rdb := redis.NewClient(&redis.Options{Addr: hole.addr(), MaxRetries: -1, ContextTimeoutEnabled: true, PoolSize: 20, DialTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	const timeout = 2 * time.Second // far above any scheduling delay
	store, err := redisstore.New(rdb, redisstore.WithTimeout(timeout), redisstore.WithBatching(1, 100))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Epoch)
	br := floodgate.NewBreaker(floodgate.BreakerConfig{Threshold: 1, Cooldown: time.Second, Now: clock.Now})
	policies := []floodgate.Policy{{Name: "p", Algorithm: floodgate.FixedWindow, Quota: 100, Window: time.Minute}}
	l, _ := floodgate.NewLimiter(store, policies, floodgate.WithBreaker(br), floodgate.WithLogger(slog.New(slog.DiscardHandler)))
	ctx := context.Background()
	if _, err := l.Take(ctx, "k", 1); !errors.Is(err, floodgate.ErrStoreUnavailable) || br.State() != floodgate.BreakerOpen {
		t.Fatalf("first call: %v, breaker %v", err, br.State())
	}
	before := hole.conns()
	clock.Advance(time.Second)
	var quick atomic.Int32
	probeDone := make(chan struct{})
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			l.Take(ctx, "k", 1)
			if time.Since(start) < timeout/2 {
				quick.Add(1)
			}
		}()
	}
	go func() { wg.Wait(); close(probeDone) }()
	<-probeDone
	if quick.Load() != 9 {
		t.Fatalf("%d of 10 answered without waiting for the store, want 9 (one probe)", quick.Load())
	}
	if got := hole.conns() - before; got != 1 {
		t.Fatalf("the blackhole received %d connections after the cooldown, want 1", got)
	}
}

// blackhole accepts connections and reads what they send, never
// answering; it counts the connections.
type blackhole struct {
	ln net.Listener
	n  atomic.Int32
}

func newBlackhole(t *testing.T) *blackhole {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &blackhole{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.n.Add(1)
			t.Cleanup(func() { c.Close() })
			go io.Copy(io.Discard, c)
		}
	}()
	return h
}

func (h *blackhole) addr() string { return h.ln.Addr().String() }

func (h *blackhole) conns() int32 { return h.n.Load() }

// callErr is a store error naming the call it came from.
type callErr struct {
	id       uint64
	isolated bool
}

func (e callErr) Error() string             { return "call failed" }
func (e callErr) StoreCall() (uint64, bool) { return e.id, e.isolated }
func (e callErr) Unwrap() error             { return floodgate.ErrStoreUnavailable }

// callStore fails every Take with the error it holds.
type callStore struct {
	floodgate.Store
	err atomic.Value
}

func (s *callStore) Take(context.Context, string, floodgate.Cost, []floodgate.Policy, []floodgate.Result) error {
	return s.err.Load().(callErr)
}

// TestBreakerCountsCalls: the requests of one failed store call (a batch
// of 128) count as one failure, so 4 such calls leave a threshold of 5
// closed and the fifth opens it; isolated failures (one Cluster master's,
// which the store's own breaker answers for) count none (docs/REDIS.md,
// "Timeouts").
func TestBreakerCountsCalls(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	br := floodgate.NewBreaker(floodgate.BreakerConfig{Now: clock.Now})
	s := &callStore{}
	policies := []floodgate.Policy{{Name: "p", Algorithm: floodgate.FixedWindow, Quota: 100, Window: time.Minute}}
	l, _ := floodgate.NewLimiter(s, policies, floodgate.WithBreaker(br), floodgate.WithLogger(slog.New(slog.DiscardHandler)))
	ctx := context.Background()
	batch := func(id uint64, isolated bool) {
		s.err.Store(callErr{id: id, isolated: isolated})
		for range 128 {
			l.Take(ctx, "k", 1)
		}
	}
	for id := uint64(1); id <= 20; id++ {
		batch(id, true)
	}
	if br.State() != floodgate.BreakerClosed {
		t.Fatalf("20 isolated failed calls: breaker %v, want closed", br.State())
	}
	for id := uint64(21); id <= 24; id++ {
		batch(id, false)
		if br.State() != floodgate.BreakerClosed {
			t.Fatalf("after call %d (%d failed calls of 128 requests): breaker %v, want closed", id, id-20, br.State())
		}
	}
	batch(25, false)
	if br.State() != floodgate.BreakerOpen {
		t.Fatalf("5 failed calls: breaker %v, want open", br.State())
	}
}
