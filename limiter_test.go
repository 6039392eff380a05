package floodgate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/storetest"
)

func newMemory(t *testing.T, now func() time.Time) *memorystore.Store {
	st := testkit.Memory(t, memorystore.WithClock(now))
	return st
}

func TestPolicyValidate(t *testing.T) {
	good := floodgate.Policy{Name: "api", Algorithm: floodgate.GCRA, Quota: 10, Window: time.Second}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		mutate func(*floodgate.Policy)
		msg    string
	}{
		"quota zero":      {func(p *floodgate.Policy) { p.Quota = 0 }, "quota must be positive"},
		"window short":    {func(p *floodgate.Policy) { p.Window = 999 * time.Microsecond }, "at least 1ms"},
		"burst negative":  {func(p *floodgate.Policy) { p.Burst = -1 }, "burst must not be negative"},
		"burst on window": {func(p *floodgate.Policy) { p.Algorithm, p.Burst = floodgate.FixedWindow, 5 }, "burst applies to"},
		"no algorithm":    {func(p *floodgate.Policy) { p.Algorithm = 0 }, "no algorithm set (want one of fixed-window, sliding-window-log, sliding-window-counter, token-bucket, gcra, anchored-window)"},
		"empty name":      {func(p *floodgate.Policy) { p.Name = "" }, "name is empty"},
		"name with brace": {func(p *floodgate.Policy) { p.Name = "a{b}" }, "character '{'"},
		"name with quote": {func(p *floodgate.Policy) { p.Name = `a"b` }, `character '"'`},
		"too precise":     {func(p *floodgate.Policy) { p.Quota, p.Window = 1e9, 24*time.Hour }, "2^53"},
	} {
		t.Run(name, func(t *testing.T) {
			p := good
			tc.mutate(&p)
			err := p.Validate()
			if !errors.Is(err, floodgate.ErrInvalidPolicy) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Validate() = %v, want ErrInvalidPolicy mentioning %q", err, tc.msg)
			}
		})
	}
	// An in-flight cap needs only a name and a positive Max.
	if err := (floodgate.Concurrency{Name: "inflight", Max: 2}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []floodgate.Concurrency{{Name: "inflight"}, {Name: "", Max: 1}, {Name: "a b", Max: 1}} {
		if err := c.Validate(); !errors.Is(err, floodgate.ErrInvalidPolicy) {
			t.Errorf("%+v: Validate() = %v, want ErrInvalidPolicy", c, err)
		}
	}
	if _, err := floodgate.ParseUnit("concurrent-requests"); err == nil || !strings.Contains(err.Error(), "Concurrency") {
		t.Errorf("ParseUnit(concurrent-requests) = %v, want an error pointing to Concurrency", err)
	}
	// A fixed window has no products, so huge quotas over long windows are fine.
	big := floodgate.Policy{Name: "day", Algorithm: floodgate.FixedWindow, Quota: 1e12, Window: 24 * time.Hour}
	if err := big.Validate(); err != nil {
		t.Fatal(err)
	}
	dup := []floodgate.Policy{good, good}
	if err := floodgate.ValidatePolicies(dup); err == nil || !strings.Contains(err.Error(), "used twice") {
		t.Fatalf("duplicate names: %v", err)
	}
}

func TestDecisionSummary(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	l, err := floodgate.NewLimiter(newMemory(t, clock.Now), []floodgate.Policy{
		{Name: "second", Algorithm: floodgate.FixedWindow, Quota: 2, Window: time.Second},
		{Name: "minute", Algorithm: floodgate.FixedWindow, Quota: 100, Window: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, _ := l.Take(ctx, "k", 1)
	// second: 1 of 2 left (50%); minute: 99 of 100: "second" is closest to its limit.
	if !d.Allowed || d.Policy.Name != "second" || d.Remaining != 1 || d.ResetAfter != time.Second {
		t.Fatalf("allowed decision reports %s remaining %d reset %v", d.Policy.Name, d.Remaining, d.ResetAfter)
	}
	l.Take(ctx, "k", 1)
	d, err = l.Take(ctx, "k", 1)
	if err != nil || d.Allowed || d.Policy.Name != "second" || d.RetryAfter != time.Second {
		t.Fatalf("denied decision: %+v %v", d, err)
	}
	if v := d.Violated(); len(v) != 1 || v[0] != "second" {
		t.Fatalf("Violated() = %v", v)
	}
	if d.Results[1].Remaining != 98 || d.Results[1].Policy.Name != "minute" {
		t.Fatalf("minute result %+v: the denied request must spend nothing", d.Results[1])
	}
	if _, err := l.Take(ctx, "k", 3); !errors.Is(err, floodgate.ErrCostExceedsQuota) {
		t.Fatalf("cost 3 > quota 2: %v", err)
	}
}

// brokenStore fails every call until healed; it stands in for a store whose
// network is down (the Redis store's tests kill a real server).
type brokenStore struct {
	floodgate.Store
	broken atomic.Bool
	calls  atomic.Int64
}

func (b *brokenStore) Take(ctx context.Context, key string, cost floodgate.Cost, ps []floodgate.Policy, rs []floodgate.Result) error {
	b.calls.Add(1)
	if b.broken.Load() {
		return errors.New("connection refused")
	}
	return b.Store.Take(ctx, key, cost, ps, rs)
}

func TestFailureModes(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	policies := []floodgate.Policy{{Name: "p", Algorithm: floodgate.SlidingWindowCounter, Quota: 4, Window: time.Minute}}
	quiet := floodgate.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	newBroken := func() *brokenStore {
		b := &brokenStore{Store: newMemory(t, clock.Now)}
		b.broken.Store(true)
		return b
	}

	t.Run("closed", func(t *testing.T) {
		b := newBroken()
		l, _ := floodgate.NewLimiter(b, policies, quiet)
		d, err := l.Take(ctx, "k", 1)
		if !errors.Is(err, floodgate.ErrStoreUnavailable) || d.Allowed || l.StoreErrors() != 1 {
			t.Fatalf("fail-closed: allowed=%v err=%v errors=%d", d.Allowed, err, l.StoreErrors())
		}
	})
	t.Run("open", func(t *testing.T) {
		b := newBroken()
		l, _ := floodgate.NewLimiter(b, policies, quiet, floodgate.WithFailureMode(floodgate.FailOpen))
		for range 10 {
			d, err := l.Take(ctx, "k", 1)
			if err != nil || !d.Allowed || !d.Degraded {
				t.Fatalf("fail-open: %+v %v", d, err)
			}
		}
		if l.StoreErrors() != 10 {
			t.Fatalf("StoreErrors %d, want 10", l.StoreErrors())
		}
	})
	t.Run("local", func(t *testing.T) {
		b := newBroken()
		// Two replicas share the quota of 4: each allows 2 while the store is down.
		l, err := floodgate.NewLimiter(b, policies, quiet, floodgate.WithLocalFallback(newMemory(t, clock.Now), 0.5), floodgate.WithStoreRetry(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		var admitted int
		for range 5 {
			d, err := l.Take(ctx, "k", 1)
			if err != nil || !d.Degraded {
				t.Fatalf("fail-to-local: %+v %v", d, err)
			}
			if d.Allowed {
				admitted++
				if d.Policy.Quota != 2 {
					t.Fatalf("local decision reports quota %d, want 2", d.Policy.Quota)
				}
			}
		}
		if admitted != 2 {
			t.Fatalf("admitted %d locally, want 2", admitted)
		}
		// A cost of 3 fits the quota of 4 but not the local share of 2: a
		// denial while the store is down, not ErrCostExceedsQuota.
		if d, err := l.Take(ctx, "other", 3); err != nil || d.Allowed || !d.Degraded || d.RetryAfter != time.Hour {
			t.Fatalf("cost 3 locally: %+v %v; want denied, degraded, retry after the store retry", d, err)
		}
		// Skipped once the breaker opened, for as long as WithStoreRetry
		// holds: only the failures that opened it reached the store.
		if b.calls.Load() != floodgate.DefaultBreakerThreshold {
			t.Fatalf("store called %d times, want %d", b.calls.Load(), floodgate.DefaultBreakerThreshold)
		}
	})
	t.Run("recovery", func(t *testing.T) {
		b := newBroken()
		br := floodgate.NewBreaker(floodgate.BreakerConfig{Threshold: 1, Cooldown: 200 * time.Millisecond, Now: clock.Now})
		l, _ := floodgate.NewLimiter(b, policies, quiet, floodgate.WithFailureMode(floodgate.FailOpen), floodgate.WithBreaker(br))
		l.Take(ctx, "k", 1)
		b.broken.Store(false)
		if d, _ := l.Take(ctx, "k", 1); !d.Degraded {
			t.Fatal("the store must be skipped right after a failure")
		}
		clock.Advance(200 * time.Millisecond)
		if d, err := l.Take(ctx, "k", 1); err != nil || d.Degraded || d.Remaining != 3 {
			t.Fatalf("after recovery: %+v %v", d, err)
		}
	})
}

func ExampleLimiter() {
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	limiter, err := floodgate.NewLimiter(store, []floodgate.Policy{
		{Name: "burst", Algorithm: floodgate.TokenBucket, Quota: 5, Window: time.Second},
		{Name: "hour", Algorithm: floodgate.SlidingWindowCounter, Quota: 1000, Window: time.Hour},
	})
	if err != nil {
		panic(err)
	}
	for i := range 6 {
		d, _ := limiter.Take(context.Background(), "client-42", 1)
		if d.Allowed {
			fmt.Printf("request %d allowed, %d left in %q\n", i+1, d.Remaining, d.Policy.Name)
		} else {
			fmt.Printf("request %d denied by %q\n", i+1, d.Policy.Name)
		}
	}
	// Output:
	// request 1 allowed, 4 left in "burst"
	// request 2 allowed, 3 left in "burst"
	// request 3 allowed, 2 left in "burst"
	// request 4 allowed, 1 left in "burst"
	// request 5 allowed, 0 left in "burst"
	// request 6 denied by "burst"
}
