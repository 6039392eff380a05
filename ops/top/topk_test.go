package top_test

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/opstest"
	"github.com/floodgate/floodgate/ops/top"
)

// TestTopKZipf feeds a Zipf workload (s = 1.1 over 100,000 keys, 300,000
// events) to a 200-counter TopK and checks the Space-Saving guarantees
// against exact counts: every reported count brackets the true one within
// its error, every error is at most N/k, every key heavier than N/k is
// reported, and the reported top 10 are the true top 10 in order wherever
// the true counts differ by more than the error bound.
func TestTopKZipf(t *testing.T) {
	const (
		keys = 100_000
		n    = 300_000
		k    = 200
	)
	rng := rand.New(rand.NewPCG(7, 11))
	z := rand.NewZipf(rng, 1.1, 1, keys-1)
	exact := map[string]uint64{}
	tk := top.NewTopK(k)
	// Keys are shuffled ranks, so heaviness is not in key order.
	perm := rng.Perm(keys)
	for range n {
		key := "ip-" + strconv.Itoa(perm[z.Uint64()])
		exact[key]++
		tk.Add(key, 1)
	}
	if tk.Total() != n {
		t.Fatalf("Total = %d", tk.Total())
	}
	bound := uint64(n / k)
	got := tk.Top(0)
	if len(got) != k {
		t.Fatalf("%d entries, want %d", len(got), k)
	}
	reported := map[string]top.Entry{}
	for _, e := range got {
		reported[e.Key] = e
		tr := exact[e.Key]
		if e.Count < tr || e.Count-e.Error > tr || e.Error > bound {
			t.Fatalf("%s: count %d error %d, true %d, bound %d", e.Key, e.Count, e.Error, tr, bound)
		}
	}
	type kv struct {
		key string
		n   uint64
	}
	var truth []kv
	for key, c := range exact {
		truth = append(truth, kv{key, c})
	}
	slices.SortFunc(truth, func(a, b kv) int { return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.key, b.key)) })
	heavy := 0
	for _, x := range truth {
		if x.n <= bound {
			break
		}
		heavy++
		if _, ok := reported[x.key]; !ok {
			t.Fatalf("key %s with %d > N/k = %d events is missing", x.key, x.n, bound)
		}
	}
	if heavy < 10 {
		t.Fatalf("only %d keys above N/k: the workload is too flat to test ranking", heavy)
	}
	top := tk.Top(10)
	for i, e := range top {
		if e.Key != truth[i].key {
			// A swap is allowed only between keys closer than the bound.
			j := slices.IndexFunc(truth, func(x kv) bool { return x.key == e.Key })
			if diff := int64(truth[i].n) - int64(truth[j].n); diff > int64(bound) || diff < -int64(bound) {
				t.Fatalf("rank %d: %s (true %d), want %s (true %d)", i+1, e.Key, truth[j].n, truth[i].key, truth[i].n)
			}
		}
	}
	t.Logf("N=%d k=%d bound=%d; heaviest %s: true %d, reported %d±%d; %d keys above the bound",
		n, k, bound, truth[0].key, truth[0].n, top[0].Count, top[0].Error, heavy)
}

// TestTopKSmall checks replacement by hand: the newcomer inherits the
// minimum as its error.
func TestTopKSmall(t *testing.T) {
	tk := top.NewTopK(2)
	tk.Add("a", 5)
	tk.Add("b", 2)
	tk.Add("c", 1) // replaces b (2): count 3, error 2
	want := []top.Entry{{Key: "a", Count: 5}, {Key: "c", Count: 3, Error: 2}}
	if got := tk.Top(0); !slices.Equal(got, want) {
		t.Fatalf("Top = %+v, want %+v", got, want)
	}
	tk.Reset()
	if got := tk.Top(0); len(got) != 0 || tk.Total() != 0 {
		t.Fatalf("after Reset: %+v", got)
	}
}

// TestOffenders: denied events are ranked per rule by fingerprint, old
// generations age out, and the collector exports at most MetricsTop series
// per rule.
func TestOffenders(t *testing.T) {
	clk := opstest.NewClock()
	o := top.NewOffenders(top.OffendersConfig{Capacity: 16, Interval: time.Minute, MetricsTop: 3, Now: clk.Now})
	for i := range 10 {
		for range (i + 1) * 10 {
			o.Observe(engine.Event{Verdict: engine.Denied, Rule: "api", Policy: "p", Key: "10.0.0." + strconv.Itoa(i)})
		}
	}
	o.Observe(engine.Event{Rule: "api", Key: "10.0.0.9", Verdict: engine.Allowed}) // not counted
	o.Observe(engine.Event{Rule: "api", Key: "10.0.0.9", Verdict: engine.Reduced}) // not counted
	o.Observe(engine.Event{Rule: "login", Key: "10.0.0.1", Shadow: true})          // counted
	got := o.Top("api", 3)
	want := []top.Entry{
		{Key: httplimit.Fingerprint("10.0.0.9"), Count: 100},
		{Key: httplimit.Fingerprint("10.0.0.8"), Count: 90},
		{Key: httplimit.Fingerprint("10.0.0.7"), Count: 80},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Top(api) = %+v, want %+v", got, want)
	}
	if got := o.Rules(); !slices.Equal(got, []string{"api", "login"}) {
		t.Fatalf("Rules = %v", got)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(o)
	if n := testutil.CollectAndCount(o, "floodgate_top_offender_requests"); n != 4 {
		t.Fatalf("%d series, want 3 for api + 1 for login", n)
	}
	exp := `# HELP floodgate_top_offender_requests Limited requests of the heaviest keys per rule over the last one to two intervals (Space-Saving upper bound); key is a fingerprint unless raw keys are configured.
# TYPE floodgate_top_offender_requests gauge
floodgate_top_offender_requests{key="` + httplimit.Fingerprint("10.0.0.9") + `",rank="1",rule="api"} 100
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(exp+
		`floodgate_top_offender_requests{key="`+httplimit.Fingerprint("10.0.0.8")+`",rank="2",rule="api"} 90
floodgate_top_offender_requests{key="`+httplimit.Fingerprint("10.0.0.7")+`",rank="3",rule="api"} 80
floodgate_top_offender_requests{key="`+httplimit.Fingerprint("10.0.0.1")+`",rank="1",rule="login"} 1
`), "floodgate_top_offender_requests"); err != nil {
		t.Fatal(err)
	}

	// One interval later the old counts are still reported (previous
	// generation) and add to the new ones.
	clk.Advance(time.Minute)
	for range 5 {
		o.Observe(engine.Event{Verdict: engine.Denied, Rule: "api", Policy: "p", Key: "10.0.0.0"})
	}
	if top := o.Top("api", 0); len(top) != 10 || top[9].Key != httplimit.Fingerprint("10.0.0.0") || top[9].Count != 15 || top[8].Count != 20 {
		t.Fatalf("after one interval: %+v", top)
	}
	// Two intervals later only the new generation is left.
	clk.Advance(time.Minute)
	o.Observe(engine.Event{Verdict: engine.Denied, Rule: "api", Policy: "p", Key: "10.0.0.5"})
	if top := o.Top("api", 0); len(top) != 2 || top[0].Count != 5 || top[1].Count != 1 {
		t.Fatalf("after two intervals: %+v", top)
	}
	clk.Advance(3 * time.Minute)
	if top := o.Top("api", 0); len(top) != 0 {
		t.Fatalf("after a long opstest.Quiet: %+v", top)
	}

	raw := top.NewOffenders(top.OffendersConfig{RawKeys: true})
	raw.Observe(engine.Event{Verdict: engine.Denied, Rule: "r", Key: "user:42"})
	if top := raw.Top("r", 1); top[0].Key != "user:42" {
		t.Fatalf("raw keys: %+v", top)
	}
}
