package envoyrls

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
)

// TestCountAsRatelimit: hits split around a limit of 10 and its
// near-limit threshold 8 as envoyproxy/ratelimit's base limiter splits
// them (limitBeforeIncrease, limitAfterIncrease).
func TestCountAsRatelimit(t *testing.T) {
	for _, tc := range []struct {
		before, hits uint64
		over, shadow bool
		want         hitCounts
	}{
		{0, 1, false, false, hitCounts{total: 1, within: 1}},
		{7, 2, false, false, hitCounts{total: 2, within: 2, near: 1}},
		{8, 1, false, false, hitCounts{total: 1, within: 1, near: 1}},
		{9, 3, true, false, hitCounts{total: 3, over: 2, near: 1}},
		{5, 20, true, false, hitCounts{total: 20, over: 15, near: 2}},
		{10, 1, true, false, hitCounts{total: 1, over: 1}},
		{9, 3, true, true, hitCounts{total: 3, over: 2, near: 1, shadow: 2}},
	} {
		if got := count(10, tc.before, tc.hits, tc.over, tc.shadow, 0.8); got != tc.want {
			t.Errorf("before %d + %d (over %v, shadow %v): %+v, want %+v", tc.before, tc.hits, tc.over, tc.shadow, got, tc.want)
		}
	}
}

// TestStatsRatioNaN: a near-limit ratio that is no number (NaN, from
// NEAR_LIMIT_RATIO=NaN) takes the default rather than counting a
// near_limit of 2^64 − 2^63 + quota hits.
func TestStatsRatioNaN(t *testing.T) {
	s, err := NewStats(prometheus.NewRegistry(), StatsOptions{NearLimitRatio: math.NaN()})
	if err != nil {
		t.Fatal(err)
	}
	if s.ratio != DefaultNearLimitRatio {
		t.Fatalf("ratio %v, want %v", s.ratio, DefaultNearLimitRatio)
	}
}

// TestStatsShadowMode: a shadow-mode limit past its quota counts
// over_limit and shadow_mode, as ratelimit does, while it answers OK.
func TestStatsShadowMode(t *testing.T) {
	reg := prometheus.NewRegistry()
	stats, err := NewStats(reg, StatsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{}
	f.now.Store(start.UnixNano())
	f.serve(t, testkit.Memory(t, memorystore.WithClock(f.clock)), Options{Stats: stats})
	for range 4 {
		expect(t, f.ask(t, 0, desc("trial=t1")), ok, ok, 0)
	}
	for name, want := range map[string]float64{"total_hits": 4, "within_limit": 1, "near_limit": 1, "over_limit": 3, "shadow_mode": 3} {
		vec := map[string]*prometheus.CounterVec{"total_hits": stats.total, "within_limit": stats.within, "near_limit": stats.near,
			"over_limit": stats.over, "shadow_mode": stats.shadow}[name]
		if got := testutil.ToFloat64(vec.WithLabelValues("shop", "trial", "")); got != want {
			t.Errorf("ratelimit_service_rate_limit_%s{domain=shop,key1=trial} = %v, want %v", name, got, want)
		}
	}
}

// TestStatsBound: past MaxSeries label sets, limits are counted under
// OverflowLabel, so a configuration's size cannot grow the series
// without bound.
func TestStatsBound(t *testing.T) {
	s, err := NewStats(prometheus.NewRegistry(), StatsOptions{MaxSeries: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*limit{
		{path: "d.a", labels: [3]string{"d", "a", ""}},
		{path: "d.b_v.c_w.e", labels: [3]string{"d", "b_v", "c_w"}},
		{path: "d.c", labels: [3]string{"d", "c", ""}},
	} {
		l.policy = policyOf(10)
		s.observe(l, 1, true, 9)
	}
	for _, l := range [][3]string{{"d", "a", ""}, {"d", "b_v", "c_w"}, {"", OverflowLabel, ""}} {
		if got := testutil.ToFloat64(s.total.WithLabelValues(l[:]...)); got != 1 {
			t.Errorf("total_hits%v = %v, want 1", l, got)
		}
	}
	if n := testutil.CollectAndCount(s.total); n != 3 {
		t.Errorf("%d series, want 3", n)
	}
}

func policyOf(quota int64) floodgate.Policy {
	return floodgate.Policy{Name: "p", Algorithm: floodgate.FixedWindow, Quota: quota, Window: time.Minute}
}

// TestStatsDottedNames: a domain, key or value may hold dots (a host
// name, an IP address); the labels are the domain and the first two entry
// names whole, as compiled, not the dotted path split at every dot.
func TestStatsDottedNames(t *testing.T) {
	eng, err := engine.New(engine.Config{Store: testkit.Memory(t)})
	if err != nil {
		t.Fatal(err)
	}
	perMinute := func(n uint32) *RateLimit { return &RateLimit{Unit: "minute", RequestsPerUnit: n} }
	cfg := &Config{Domains: []*Domain{{Domain: "api.example.com", Descriptors: []*Descriptor{
		{Key: "remote_address", Value: "203.0.113.9", RateLimit: perMinute(10)},
		{Key: "host", Value: "a.b", Descriptors: []*Descriptor{
			{Key: "path", Value: "/v1.2", RateLimit: perMinute(10), Descriptors: []*Descriptor{{Key: "user", RateLimit: perMinute(10)}}},
		}},
	}}}}
	r, err := Compile(eng, cfg, floodgate.FailClosed)
	if err != nil {
		t.Fatal(err)
	}
	top := r.domains["api.example.com"]
	second := top.nodes["host_a.b"].next.nodes["path_/v1.2"]
	for _, c := range []struct {
		l    *limit
		want [3]string
	}{
		{top.nodes["remote_address_203.0.113.9"].limit, [3]string{"api.example.com", "remote_address_203.0.113.9", ""}},
		{second.limit, [3]string{"api.example.com", "host_a.b", "path_/v1.2"}},
		{second.next.nodes["user"].limit, [3]string{"api.example.com", "host_a.b", "path_/v1.2"}},
	} {
		if c.l.labels != c.want {
			t.Errorf("%s: labels %q, want %q", c.l.path, c.l.labels, c.want)
		}
	}
}
