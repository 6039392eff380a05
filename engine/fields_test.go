package engine_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
)

// BenchmarkHeadersSet is the cost of the default fields on one response of
// a one-policy rule: formatting, the clock read and the map inserts
// (docs/BENCHMARKS.md weighs it against the middleware's added cost).
func BenchmarkHeadersSet(b *testing.B) {
	p := floodgate.Policy{Name: "api", Algorithm: floodgate.GCRA, Quota: 1e6, Window: time.Minute}
	field, err := engine.PolicyField([]floodgate.Policy{p}, nil)
	if err != nil {
		b.Fatal(err)
	}
	o := engine.NewOutcome(engine.Allowed, field, engine.Item{Name: "api", Quota: p.Quota, Window: p.Window, Unit: "requests",
		Allowed: true, Remaining: 999_998, ResetAfter: 60 * time.Microsecond, Algorithm: p.Algorithm})
	f := &engine.Fields{Style: engine.Both}
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		clear(h)
		f.Set(h, &o)
	}
	if len(h) != 5 {
		b.Fatalf("%d fields set, want 5: %v", len(h), h)
	}
}

// TestFieldsOfOutcomes: the fields of an admitted, a refused and a shadow
// outcome with a rate policy and a cap, as a client reads them.
func TestFieldsOfOutcomes(t *testing.T) {
	rate := engine.Item{Name: "api", Quota: 60, Window: time.Minute, Unit: "requests", Allowed: true, Remaining: 30,
		ResetAfter: 10 * time.Second, Algorithm: floodgate.GCRA}
	slot := engine.Item{Name: "inflight", Quota: 4, Unit: "concurrent-requests", Allowed: true, Remaining: 3}
	field, _ := engine.PolicyField([]floodgate.Policy{{Name: "api", Quota: 60, Window: time.Minute}}, []floodgate.Concurrency{{Name: "inflight", Max: 4}})
	f := &engine.Fields{Style: engine.Both, Now: func() time.Time { return time.Unix(1_800_000_000, 0) }}
	for name, c := range map[string]struct {
		o    engine.Outcome
		want map[string]string
	}{
		"admitted": {engine.NewOutcome(engine.Allowed, field, slot, rate), map[string]string{
			"Ratelimit": `"inflight";r=3, "api";r=30;t=30`, "Ratelimit-Policy": `"api";q=60;w=60, "inflight";q=4;qu="concurrent-requests"`,
			"X-Ratelimit-Limit": "60", "X-Ratelimit-Remaining": "30", "X-Ratelimit-Reset": "1800000010"}},
		"refused by the cap": {engine.NewOutcome(engine.Denied, field, engine.Item{Name: "inflight", Quota: 4, Unit: "concurrent-requests",
			RetryAfter: time.Second, ResetAfter: time.Second}), map[string]string{
			"Ratelimit": `"inflight";r=0`, "X-Ratelimit-Limit": "4", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "1800000001"}},
		"shadow": {shadow(engine.NewOutcome(engine.Allowed, field, rate)), map[string]string{}},
	} {
		h := http.Header{}
		f.Set(h, &c.o)
		for k, v := range c.want {
			if got := h.Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", name, k, got, v)
			}
		}
		if len(c.want) == 0 && len(h) != 0 {
			t.Errorf("%s: fields %v, want none", name, h)
		}
	}
}

func shadow(o engine.Outcome) engine.Outcome {
	o.Shadow = true
	return o
}

// TestSpendableWindowEnd: a window whose count restarts at its end, the
// fixed window's or the key's anchored one, reports t up to that end
// and r cut to what q/w allows in it (draft-11 §8); the sliding counter,
// whose units free gradually, reports how long its units last at q/w.
func TestSpendableWindowEnd(t *testing.T) {
	for _, c := range []struct {
		a    floodgate.Algorithm
		r, t int64
	}{
		{floodgate.FixedWindow, 75, 45},
		{floodgate.AnchoredWindow, 75, 45},
		{floodgate.SlidingWindowCounter, 98, 59}, // 99 last 59.4 s; 100/60 allows 98 in 59
	} {
		it := engine.Item{Name: "minute", Quota: 100, Window: time.Minute, Allowed: true, Remaining: 99, ResetAfter: 45 * time.Second, Algorithm: c.a}
		if r, tt := engine.Spendable(&it); r != c.r || tt != c.t {
			t.Errorf("%v: Spendable = (%d, %d), want (%d, %d)", c.a, r, tt, c.r, c.t)
		}
	}
}
