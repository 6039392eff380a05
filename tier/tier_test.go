package tier_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/tiertest"
	"github.com/floodgate/floodgate/tier"
)

// fakeSource answers from a map, counts its queries, and can be made to
// fail or to hold queries until released.
type fakeSource struct {
	mu      sync.Mutex
	entries map[tier.Hash]tier.Entry
	errs    map[tier.Hash]error
	queries atomic.Int64
	down    atomic.Bool
	gate    chan struct{} // when non-nil, each query waits for it to close
}

func newFake() *fakeSource {
	return &fakeSource{entries: map[tier.Hash]tier.Entry{}, errs: map[tier.Hash]error{}}
}

func (f *fakeSource) Lookup(ctx context.Context, h tier.Hash) (tier.Entry, error) {
	f.queries.Add(1)
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if f.down.Load() {
		return tier.Entry{}, fmt.Errorf("%w: connection refused", tier.ErrUnavailable)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs[h]; err != nil {
		return tier.Entry{}, err
	}
	e, ok := f.entries[h]
	if !ok {
		return tier.Entry{}, tier.ErrUnknownKey
	}
	return e, nil
}

func (f *fakeSource) set(key string, e tier.Entry, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries[tier.HashKey(key)] = e
	f.errs[tier.HashKey(key)] = err
}

var free = tier.Entry{Tenant: "acme", Tier: "free", Limits: tier.Limits{Policies: []floodgate.Policy{tiertest.PerMinute("free", 10)}}}

func TestHash(t *testing.T) {
	// SHA-256("abc") from FIPS 180-2, appendix B.1.
	const abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	h := tier.HashKey("abc")
	if h.String() != abc || h.ID() != abc[:16] {
		t.Fatalf("HashKey(abc) = %s, ID %s", h, h.ID())
	}
	back, err := tier.ParseHash(strings.ToUpper(abc))
	if err != nil || back != h {
		t.Fatalf("ParseHash: %v, %v", back, err)
	}
	for _, bad := range []string{"", abc[:63], abc + "0", "zz" + abc[2:]} {
		if _, err := tier.ParseHash(bad); err == nil {
			t.Errorf("ParseHash(%q) accepted", bad)
		}
	}
	k1, err1 := tier.NewKey()
	k2, err2 := tier.NewKey()
	if err1 != nil || err2 != nil || k1 == k2 || !strings.HasPrefix(k1, tier.KeyPrefix) || len(k1) != len(tier.KeyPrefix)+43 {
		t.Fatalf("NewKey: %q %q %v %v", k1, k2, err1, err2)
	}
}

func TestStatic(t *testing.T) {
	tiers := map[string]tier.Limits{"free": {Policies: []floodgate.Policy{tiertest.PerMinute("free", 10)}}, "pro": {Policies: []floodgate.Policy{tiertest.PerMinute("pro", 1000)}}}
	s, err := tier.NewStatic(tiers, []tier.StaticKey{
		{Hash: tier.HashKey("k-free"), Tenant: "acme", Tier: "free"},
		{Hash: tier.HashKey("k-pro"), Tenant: "globex", Tier: "pro"},
		{Hash: tier.HashKey("k-off"), Tenant: "acme", Tier: "pro", Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	tiers["free"].Policies[0].Quota = 1 // the source keeps its own copy
	ctx := context.Background()
	e, err := s.Lookup(ctx, tier.HashKey("k-free"))
	if err != nil || e.Tenant != "acme" || e.Tier != "free" || len(e.Policies) != 1 || e.Policies[0].Quota != 10 {
		t.Fatalf("k-free: %+v %v", e, err)
	}
	if _, err := s.Lookup(ctx, tier.HashKey("k-off")); !errors.Is(err, tier.ErrDisabledKey) {
		t.Fatalf("k-off: %v", err)
	}
	if _, err := s.Lookup(ctx, tier.HashKey("nope")); !errors.Is(err, tier.ErrUnknownKey) {
		t.Fatalf("nope: %v", err)
	}

	for name, c := range map[string]struct {
		tiers map[string]tier.Limits
		keys  []tier.StaticKey
		want  string
	}{
		"no policies":  {map[string]tier.Limits{"free": {}}, nil, "no policies"},
		"bad policy":   {map[string]tier.Limits{"free": {Policies: []floodgate.Policy{{Name: "x", Algorithm: floodgate.GCRA}}}}, nil, "quota must be positive"},
		"bad cap":      {map[string]tier.Limits{"free": {Concurrency: []floodgate.Concurrency{{Name: "x"}}}}, nil, "max must be positive"},
		"unknown tier": {tiers, []tier.StaticKey{{Hash: tier.HashKey("a"), Tenant: "t", Tier: "gold"}}, `unknown tier "gold"`},
		"no tenant":    {tiers, []tier.StaticKey{{Hash: tier.HashKey("a"), Tier: "free"}}, "empty tenant"},
		"twice": {tiers, []tier.StaticKey{
			{Hash: tier.HashKey("a"), Tenant: "t", Tier: "free"}, {Hash: tier.HashKey("a"), Tenant: "u", Tier: "pro"},
		}, "given twice"},
	} {
		if _, err := tier.NewStatic(c.tiers, c.keys); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, c.want)
		}
	}
}

func TestCacheTTL(t *testing.T) {
	src := newFake()
	src.set("k", free, nil)
	clk := tiertest.NewClock()
	c := tier.NewCache(src, tier.CacheOptions{TTL: time.Minute, NegativeTTL: 5 * time.Second, Now: clk.Now})
	ctx := context.Background()
	look := func(key string) error {
		_, err := c.Lookup(ctx, tier.HashKey(key))
		return err
	}

	for range 100 {
		if err := look("k"); err != nil {
			t.Fatal(err)
		}
	}
	if n := src.queries.Load(); n != 1 {
		t.Fatalf("100 lookups of one key made %d queries, want 1", n)
	}
	clk.Add(59 * time.Second)
	look("k")
	if n := src.queries.Load(); n != 1 {
		t.Fatalf("at 59 s: %d queries, want 1", n)
	}
	clk.Add(time.Second)
	look("k")
	if n := src.queries.Load(); n != 2 {
		t.Fatalf("at 60 s: %d queries, want 2", n)
	}

	// Negative answers are kept for NegativeTTL only.
	for range 10 {
		if err := look("new"); !errors.Is(err, tier.ErrUnknownKey) {
			t.Fatalf("new: %v", err)
		}
	}
	if n := src.queries.Load(); n != 3 {
		t.Fatalf("10 lookups of an unknown key: %d queries in all, want 3", n)
	}
	src.set("new", free, nil)
	clk.Add(4 * time.Second)
	if err := look("new"); !errors.Is(err, tier.ErrUnknownKey) {
		t.Fatalf("new at 4 s: %v, want still unknown from the cache", err)
	}
	clk.Add(time.Second)
	if err := look("new"); err != nil {
		t.Fatalf("new at 5 s: %v, want found", err)
	}
	// A key revoked at the source passes until its entry expires.
	src.set("k", tier.Entry{}, tier.ErrDisabledKey)
	if err := look("k"); err != nil {
		t.Fatalf("revoked, entry fresh: %v", err)
	}
	clk.Add(time.Minute)
	if err := look("k"); !errors.Is(err, tier.ErrDisabledKey) {
		t.Fatalf("revoked, entry expired: %v", err)
	}
	// Forget skips the wait.
	src.set("new", tier.Entry{}, tier.ErrDisabledKey)
	c.Forget(tier.HashKey("new"))
	if err := look("new"); !errors.Is(err, tier.ErrDisabledKey) {
		t.Fatalf("after Forget: %v", err)
	}
}

func TestCacheSingleflight(t *testing.T) {
	src := newFake()
	src.set("k", free, nil)
	src.gate = make(chan struct{})
	c := tier.NewCache(src, tier.CacheOptions{})
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			e, err := c.Lookup(context.Background(), tier.HashKey("k"))
			if err == nil && e.Tenant != "acme" {
				err = fmt.Errorf("tenant %q", e.Tenant)
			}
			errs <- err
		})
	}
	// Let every goroutine reach the cache before the query answers.
	for c.Stats().Misses < n {
		time.Sleep(time.Millisecond)
	}
	close(src.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if q := src.queries.Load(); q != 1 {
		t.Fatalf("a burst of %d lookups of one new key made %d queries, want 1", n, q)
	}
}

func TestCacheCallerGivesUp(t *testing.T) {
	src := newFake()
	src.set("k", free, nil)
	src.gate = make(chan struct{})
	c := tier.NewCache(src, tier.CacheOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Lookup(ctx, tier.HashKey("k")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the caller's deadline", err)
	}
	// The shared query goes on and fills the cache for the next caller.
	close(src.gate)
	for c.Stats().Entries == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Lookup(context.Background(), tier.HashKey("k")); err != nil || src.queries.Load() != 1 {
		t.Fatalf("after the query: %v, %d queries", err, src.queries.Load())
	}
}

func TestCacheBounded(t *testing.T) {
	for _, max := range []int{10, 1000, 5000} {
		src := newFake()
		clk := tiertest.NewClock()
		c := tier.NewCache(src, tier.CacheOptions{MaxEntries: max, Now: clk.Now})
		for i := range 3 * max {
			src.set(fmt.Sprint(i), free, nil)
			if _, err := c.Lookup(context.Background(), tier.HashKey(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		got := c.Stats().Entries
		if got > max || got < max*9/10 {
			t.Fatalf("MaxEntries %d: %d entries after %d keys", max, got, 3*max)
		}
	}
}

func TestCacheOutage(t *testing.T) {
	src := newFake()
	src.set("warm", free, nil)
	src.set("old", free, nil)
	clk := tiertest.NewClock()
	logs := &tiertest.Logs{}
	c := tier.NewCache(src, tier.CacheOptions{TTL: time.Minute, MaxStale: time.Hour, RetryInterval: time.Second, Now: clk.Now, Logger: slog.New(logs)})
	ctx := context.Background()
	look := func(key string) error {
		_, err := c.Lookup(ctx, tier.HashKey(key))
		return err
	}
	look("old")
	clk.Add(30 * time.Second)
	look("warm")

	src.down.Store(true)
	clk.Add(45 * time.Second) // "old" expired, "warm" still fresh
	for i := range 50 {
		if err := look("warm"); err != nil {
			t.Fatalf("warm key during outage: %v", err)
		}
		if err := look("old"); err != nil {
			t.Fatalf("expired key during outage: %v (want the stale entry)", err)
		}
		if err := look(fmt.Sprint("unknown-", i)); !errors.Is(err, tier.ErrUnavailable) {
			t.Fatalf("unknown key during outage: %v", err)
		}
	}
	st := c.Stats()
	// The first failure opens the breaker; nothing else is asked until
	// RetryInterval has passed.
	if !st.Down || st.Outages != 1 || st.Failures != 1 || st.Queries != 3 || st.Stale != 50 {
		t.Fatalf("stats %+v, want down, 1 outage, 1 failure, 3 queries, 50 stale", st)
	}
	if n := logs.Count("unavailable"); n != 1 {
		t.Fatalf("%d outage log records for 150 lookups, want 1", n)
	}
	clk.Add(time.Second)
	look("probe-1")
	look("probe-2")
	if st := c.Stats(); st.Failures != 2 || st.Queries != 4 {
		t.Fatalf("after RetryInterval: %+v, want one more probe", st)
	}
	// Past MaxStale an entry no longer answers.
	clk.Add(2 * time.Hour)
	if err := look("old"); !errors.Is(err, tier.ErrUnavailable) {
		t.Fatalf("beyond MaxStale: %v", err)
	}

	src.down.Store(false)
	clk.Add(time.Second)
	if err := look("old"); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if st := c.Stats(); st.Down || st.Outages != 1 || logs.Count("recovered") != 1 {
		t.Fatalf("after recovery: %+v, %d recovery records", st, logs.Count("recovered"))
	}
}

func TestCacheInvalidTier(t *testing.T) {
	src := newFake()
	src.set("k", tier.Entry{}, fmt.Errorf("%w %q: no policies", tier.ErrInvalidTier, "free"))
	logs := &tiertest.Logs{}
	c := tier.NewCache(src, tier.CacheOptions{Logger: slog.New(logs)})
	for range 5 {
		if _, err := c.Lookup(context.Background(), tier.HashKey("k")); !errors.Is(err, tier.ErrInvalidTier) {
			t.Fatalf("err %v", err)
		}
	}
	if st := c.Stats(); src.queries.Load() != 1 || st.Down || logs.Count("unusable tier") != 1 {
		t.Fatalf("%d queries, stats %+v, want 1 query, source up, one log record", src.queries.Load(), st)
	}
}

func TestParseLimit(t *testing.T) {
	var l tier.Limits
	if err := tier.ParseLimit("name=minute,quota=10,window=1m", &l); err != nil {
		t.Fatal(err)
	}
	if err := tier.ParseLimit("name=burst, algorithm=gcra, quota=100, window=1s, burst=20, unit=requests", &l); err != nil {
		t.Fatal(err)
	}
	if err := tier.ParseLimit("name=inflight,quota=4,unit=concurrent-requests", &l); err != nil {
		t.Fatal(err)
	}
	want := tier.Limits{
		Policies: []floodgate.Policy{
			{Name: "minute", Algorithm: floodgate.SlidingWindowCounter, Quota: 10, Window: time.Minute},
			{Name: "burst", Algorithm: floodgate.GCRA, Quota: 100, Window: time.Second, Burst: 20},
		},
		Concurrency: []floodgate.Concurrency{{Name: "inflight", Max: 4}},
	}
	if !reflect.DeepEqual(l, want) {
		t.Fatalf("parsed %+v, want %+v", l, want)
	}
	var back tier.Limits
	for spec := range strings.SplitSeq(tier.FormatLimits(l), "; ") {
		if err := tier.ParseLimit(spec, &back); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(back, want) {
		t.Fatalf("round trip: %+v", back)
	}
	for _, bad := range []string{"", "name=x", "name=x,quota=10", "name=x,quota=ten,window=1m", "name=x,quota=1,window=1m,burst=2",
		"name=x,quota=1,window=1m,colour=red", "name=x quota=1", "name=x,unit=concurrent-requests"} {
		if err := tier.ParseLimit(bad, &tier.Limits{}); !errors.Is(err, floodgate.ErrInvalidPolicy) {
			t.Errorf("ParseLimit(%q): %v", bad, err)
		}
	}
}
