package bench

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/tier"
	"github.com/floodgate/floodgate/tierhttp"
)

// tierWorkload builds the two middlewares BenchmarkTierPlan compares, over
// one memory store and 1,000 API keys of 1,000 tenants sent as X-API-Key
// from 1,000 client addresses; limits are never hit.
//
//   - static: one rule keyed by the API key (httplimit.APIKey), the policy
//     in the rule;
//   - tier: the same policy as every key's tier, through tierhttp.Plan over a
//     warm tier.Cache, the path a PostgreSQL source takes once its keys
//     are cached (the Static source behind it is never asked).
func tierWorkload(tb testing.TB) (reqs []*http.Request, static, tiered http.Handler) {
	trivial := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	api := []floodgate.Policy{{Name: "api", Algorithm: floodgate.GCRA, Quota: 1e7, Window: time.Minute}}

	var keys []tier.StaticKey
	for i := range 1000 {
		key := fmt.Sprintf("fg_bench-key-%04d", i)
		keys = append(keys, tier.StaticKey{Hash: tier.HashKey(key), Tenant: fmt.Sprint("tenant-", i), Tier: "pro"})
		r := httptest.NewRequest("GET", "/api/items", nil)
		r.RemoteAddr = fmt.Sprintf("10.0.%d.%d:40000", i/256, i%256)
		r.Header.Set("X-API-Key", key)
		reqs = append(reqs, r)
	}
	src, err := tier.NewStatic(map[string]tier.Limits{"pro": {Policies: api}}, keys)
	if err != nil {
		tb.Fatal(err)
	}
	cache := tier.NewCache(src, tier.CacheOptions{TTL: time.Hour})

	store := testkit.Memory(tb)
	build := func(rule httplimit.Rule) http.Handler {
		mw, err := httplimit.New(httplimit.Config{Store: store, Rules: []httplimit.Rule{rule}})
		if err != nil {
			tb.Fatal(err)
		}
		return mw.Wrap(trivial)
	}
	static = build(httplimit.Rule{Pattern: "/", Key: []httplimit.KeyPart{httplimit.APIKey("X-API-Key")}, Rule: engine.Rule{Policies: api}})
	tiered = build(httplimit.Rule{Pattern: "/", Plan: tierhttp.Plan(cache, tierhttp.PlanOptions{})})

	for _, r := range reqs { // warm the cache and the per-plan limiters
		rec := httptest.NewRecorder()
		tiered.ServeHTTP(rec, r)
		if rec.Code != 200 {
			tb.Fatalf("warming: %d %s", rec.Code, rec.Body)
		}
	}
	if st := cache.Stats(); st.Queries != 1000 || st.Entries != 1000 {
		tb.Fatalf("warming: %+v", st)
	}
	return reqs, static, tiered
}

func runServe(b *testing.B, h http.Handler, reqs []*http.Request) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, reqs[i%len(reqs)])
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
		i++
	}
}

func runServeParallel(b *testing.B, h http.Handler, reqs []*http.Request) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, reqs[i%len(reqs)])
			if rec.Code != 200 {
				b.Error(rec.Code)
				return
			}
			i++
		}
	})
}

// BenchmarkTierPlan measures the middleware with tier plans from a warm
// cache (rule=tier) against the same limits in a static rule keyed by API
// key (rule=static), serially and in parallel, in one run. The
// requirement is tier throughput ≥ 0.9 × static, i.e. tier ns/op ≤ static
// ns/op ÷ 0.9; TestTierThroughput checks it.
func BenchmarkTierPlan(b *testing.B) {
	reqs, static, tiered := tierWorkload(b)
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"rule=static", static}, {"rule=tier", tiered}} {
		b.Run(c.name, func(b *testing.B) { runServe(b, c.h, reqs) })
		b.Run(c.name+"/parallel", func(b *testing.B) { runServeParallel(b, c.h, reqs) })
	}
}

// TestTierThroughput serves the same requests through both sides of
// BenchmarkTierPlan in alternating batches and requires the tier rule's
// throughput to be at least 0.9 × the static rule's, as the median over
// rounds of static's time ÷ tier's time. -short skips it (it takes a few
// seconds); run it without -race, which slows the two sides unevenly.
func TestTierThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test (-short)")
	}
	reqs, static, tiered := tierWorkload(t)
	const rounds, batch = 100, 2000
	batchNs := func(h http.Handler, off int) float64 {
		start := time.Now()
		for i := range batch {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, reqs[(off+i)%len(reqs)])
			if rec.Code != 200 {
				t.Fatal(rec.Code)
			}
		}
		return float64(time.Since(start).Nanoseconds()) / batch
	}
	// Each round serves one batch per side, back to back in alternating
	// order; the ratio of the two batches of a round compares them under
	// the same load from the rest of the machine.
	var s, tr, paired []float64
	for r := range rounds {
		var bs, bt float64
		if r%2 == 0 {
			bs = batchNs(static, r)
			bt = batchNs(tiered, r)
		} else {
			bt = batchNs(tiered, r)
			bs = batchNs(static, r)
		}
		s, tr, paired = append(s, bs), append(tr, bt), append(paired, bs/bt)
	}
	slices.Sort(s)
	slices.Sort(tr)
	slices.Sort(paired)
	ratio := paired[rounds/2] // throughput of tier ÷ throughput of static
	t.Logf("%d rounds of %d requests a side: ns/op static %.0f (fastest %.0f), tier %.0f (fastest %.0f) (medians): tier throughput = %.2f × static (median of the rounds' ratios)",
		rounds, batch, s[rounds/2], s[0], tr[rounds/2], tr[0], ratio)
	if ratio < 0.9 {
		t.Fatalf("tier throughput %.2f × static, want ≥ 0.9", ratio)
	}
}
