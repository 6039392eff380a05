package floodgate_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/storetest"
)

// TestNewLimiterRefuses checks that NewLimiter refuses every nil argument,
// value out of range and contradiction among options, in either order.
func TestNewLimiterRefuses(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	store := newMemory(t, clock.Now)
	local := newMemory(t, clock.Now)
	policies := []floodgate.Policy{{Name: "p", Algorithm: floodgate.GCRA, Quota: 4, Window: time.Second}}
	for name, tc := range map[string]struct {
		store floodgate.Store
		opts  []floodgate.Option
		msg   string
	}{
		"nil store":             {nil, nil, "nil store"},
		"nil pointer store":     {(*memorystore.Store)(nil), nil, "nil store"},
		"nil pointer local":     {store, []floodgate.Option{floodgate.WithLocalFallback((*memorystore.Store)(nil), 0.5)}, "WithLocalFallback: nil store"},
		"nil option":            {store, []floodgate.Option{nil}, "nil option"},
		"unknown mode":          {store, []floodgate.Option{floodgate.WithFailureMode(7)}, "unknown failure mode failure-mode(7)"},
		"share 2":               {store, []floodgate.Option{floodgate.WithLocalFallback(local, 2)}, "share 2 is outside (0, 1]"},
		"share 0":               {store, []floodgate.Option{floodgate.WithLocalFallback(local, 0)}, "share 0 is outside (0, 1]"},
		"share NaN":             {store, []floodgate.Option{floodgate.WithLocalFallback(local, math.NaN())}, "share NaN is outside (0, 1]"},
		"nil local":             {store, []floodgate.Option{floodgate.WithLocalFallback(nil, 0.5)}, "WithLocalFallback: nil store"},
		"local then open":       {store, []floodgate.Option{floodgate.WithLocalFallback(local, 0.5), floodgate.WithFailureMode(floodgate.FailOpen)}, "says fail-open"},
		"open then local":       {store, []floodgate.Option{floodgate.WithFailureMode(floodgate.FailOpen), floodgate.WithLocalFallback(local, 0.5)}, "says fail-open"},
		"closed then local":     {store, []floodgate.Option{floodgate.WithFailureMode(floodgate.FailClosed), floodgate.WithLocalFallback(local, 0.5)}, "says fail-closed"},
		"to-local, no local":    {store, []floodgate.Option{floodgate.WithFailureMode(floodgate.FailToLocal)}, "needs WithLocalFallback"},
		"nil logger":            {store, []floodgate.Option{floodgate.WithLogger(nil)}, "nil logger"},
		"negative log interval": {store, []floodgate.Option{floodgate.WithFailureLogInterval(-time.Second)}, "-1s is negative"},
		"negative retry":        {store, []floodgate.Option{floodgate.WithStoreRetry(-time.Second)}, "-1s is negative"},
		"nil clock":             {store, []floodgate.Option{floodgate.WithClock(nil)}, "nil clock"},
	} {
		t.Run(name, func(t *testing.T) {
			l, err := floodgate.NewLimiter(tc.store, policies, tc.opts...)
			if l != nil || !errors.Is(err, floodgate.ErrInvalidOption) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("NewLimiter = %v, %v; want ErrInvalidOption mentioning %q", l, err, tc.msg)
			}
		})
	}
	if _, err := floodgate.NewLimiter(store, nil); !errors.Is(err, floodgate.ErrInvalidPolicy) {
		t.Fatalf("no policies: %v, want ErrInvalidPolicy", err)
	}
	// Saying fail-to-local twice is no contradiction, in either order.
	for _, opts := range [][]floodgate.Option{
		{floodgate.WithFailureMode(floodgate.FailToLocal), floodgate.WithLocalFallback(local, 0.5)},
		{floodgate.WithLocalFallback(local, 0.5), floodgate.WithFailureMode(floodgate.FailToLocal)},
	} {
		if _, err := floodgate.NewLimiter(store, policies, opts...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWaitAnswersAtOnce checks the calls Wait must not retry: a cost that
// can never pass, a failing store under FailClosed, and a peek; and that a
// wait without a deadline sleeps until admitted.
func TestWaitAnswersAtOnce(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	policies := []floodgate.Policy{{Name: "p", Algorithm: floodgate.TokenBucket, Quota: 2, Window: time.Minute}}
	ctx := context.Background()
	b := &brokenStore{Store: newMemory(t, clock.Now)}
	l, err := floodgate.NewLimiter(b, policies, floodgate.WithClock(clock), floodgate.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Wait(ctx, "k", 3); !errors.Is(err, floodgate.ErrCostExceedsQuota) {
		t.Fatalf("cost 3 over a quota of 2: %v", err)
	}
	l.Take(ctx, "k", 2)
	if d, err := l.Wait(ctx, "k", 0); err != nil || d.Allowed || !clock.Now().Equal(storetest.Epoch) {
		t.Fatalf("peek of a spent key: %+v %v; want a denied answer at once", d, err)
	}
	// Without a deadline Wait sleeps as long as needed: one token per 30 s.
	if d, err := l.Wait(ctx, "k", 1); err != nil || !d.Allowed || clock.Now().Sub(storetest.Epoch) != 30*time.Second {
		t.Fatalf("Wait for a token: %+v %v after %v; want admitted after 30s", d, err, clock.Now().Sub(storetest.Epoch))
	}
	b.broken.Store(true)
	if _, err := l.Wait(ctx, "k", 1); !errors.Is(err, floodgate.ErrStoreUnavailable) || clock.Now().Sub(storetest.Epoch) != 30*time.Second {
		t.Fatalf("failing store under FailClosed: %v; want ErrStoreUnavailable at once", err)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestTakeRefusesNegativeCost: a negative cost is ErrInvalidCost naming the
// unit and the value, and spends nothing.
func TestTakeRefusesNegativeCost(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	l, err := floodgate.NewLimiter(newMemory(t, clock.Now), []floodgate.Policy{{Name: "p", Algorithm: floodgate.GCRA, Quota: 4, Window: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		cost floodgate.Cost
		msg  string
	}{
		{floodgate.Cost{Requests: -1}, "floodgate: invalid cost: -1 requests; a cost is at least 0"},
		{floodgate.Cost{Requests: 1, ContentBytes: -7}, "floodgate: invalid cost: -7 content bytes; a cost is at least 0"},
	} {
		if _, err := l.TakeCost(ctx, "k", c.cost); !errors.Is(err, floodgate.ErrInvalidCost) || err.Error() != c.msg {
			t.Errorf("TakeCost(%+v) = %v, want %q", c.cost, err, c.msg)
		}
	}
	if d, err := l.Take(ctx, "k", 0); err != nil || d.Remaining != 4 {
		t.Errorf("after the refusals: %+v, %v; want all 4 left", d, err)
	}
}
