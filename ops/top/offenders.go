package top

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
)

// OffendersConfig configures NewOffenders.
type OffendersConfig struct {
	// Capacity is the number of Space-Saving counters per rule; default
	// 256. Memory is about Capacity × (key length + 64 bytes) per rule and
	// generation, and the error bound is (limited requests)/Capacity.
	Capacity int
	// Interval is the length of one generation; default 5m. A report
	// merges the current and the previous generation, so it covers the
	// last one to two intervals and old offenders age out.
	Interval time.Duration
	// RawKeys keeps partition keys as they are; by default only their
	// fingerprints (httplimit.Fingerprint) are held and shown, so client
	// addresses and user IDs never reach the admin API or metrics.
	RawKeys bool
	// MetricsTop is how many offenders per rule the Prometheus collector
	// reports; default 10. It bounds the series: rules × MetricsTop.
	MetricsTop int
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Offenders tracks the most limited keys per rule (REQUIREMENTS O4). It is
// an engine.Observer counting denied decisions (shadow denials
// included, reduced-capacity refusals not: those are no client's fault)
// and a prometheus.Collector exporting floodgate_top_offender_requests.
type Offenders struct {
	cfg   OffendersConfig
	mu    sync.RWMutex
	rules map[string]*generations
	desc  *prometheus.Desc
}

type generations struct {
	mu        sync.Mutex
	cur, prev *TopK
	start     time.Time
}

// NewOffenders returns an empty tracker.
// RawKeys reports whether o keeps keys as they are rather than as
// fingerprints (OffendersConfig.RawKeys).
func (o *Offenders) RawKeys() bool { return o.cfg.RawKeys }

func NewOffenders(cfg OffendersConfig) *Offenders {
	if cfg.Capacity <= 0 {
		cfg.Capacity = 256
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Minute
	}
	if cfg.MetricsTop <= 0 {
		cfg.MetricsTop = 10
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Offenders{
		cfg:   cfg,
		rules: make(map[string]*generations),
		desc: prometheus.NewDesc("floodgate_top_offender_requests",
			"Limited requests of the heaviest keys per rule over the last one to two intervals (Space-Saving upper bound); key is a fingerprint unless raw keys are configured.",
			[]string{"rule", "rank", "key"}, nil),
	}
}

// Observe counts a denied event against its key.
func (o *Offenders) Observe(e engine.Event) {
	if e.Verdict != engine.Denied && !e.Shadow {
		return
	}
	key := e.Key
	if !o.cfg.RawKeys {
		key = httplimit.Fingerprint(key)
	}
	g := o.gen(e.Rule)
	g.mu.Lock()
	g.rotate(o.cfg.Now(), o.cfg.Interval)
	cur := g.cur
	g.mu.Unlock()
	cur.Add(key, 1)
}

func (o *Offenders) gen(rule string) *generations {
	o.mu.RLock()
	g := o.rules[rule]
	o.mu.RUnlock()
	if g != nil {
		return g
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if g = o.rules[rule]; g == nil {
		g = &generations{cur: NewTopK(o.cfg.Capacity), prev: NewTopK(o.cfg.Capacity), start: o.cfg.Now()}
		o.rules[rule] = g
	}
	return g
}

// rotate starts a new generation once the current one is interval old;
// after two idle intervals both are empty.
func (g *generations) rotate(now time.Time, interval time.Duration) {
	switch age := now.Sub(g.start); {
	case age < interval:
		return
	case age < 2*interval:
		g.prev, g.cur = g.cur, g.prev
		g.cur.Reset()
		g.start = g.start.Add(interval)
	default:
		g.prev.Reset()
		g.cur.Reset()
		g.start = now
	}
}

// Top returns up to n of rule's heaviest keys (fingerprints unless
// RawKeys), heaviest first; nil for a rule with no denials. n ≤ 0 means
// every counted key.
func (o *Offenders) Top(rule string, n int) []Entry {
	o.mu.RLock()
	g := o.rules[rule]
	o.mu.RUnlock()
	if g == nil {
		return nil
	}
	g.mu.Lock()
	g.rotate(o.cfg.Now(), o.cfg.Interval)
	cur, prev := g.cur, g.prev
	// Snapshot both under the generation lock so a rotation cannot
	// reset one between the reads.
	a, af := cur.snapshot()
	b, bf := prev.snapshot()
	g.mu.Unlock()
	out := mergeSummaries(a, af, b, bf)
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// Rules returns the names of the rules with denials seen, sorted.
func (o *Offenders) Rules() []string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	names := make([]string, 0, len(o.rules))
	for n := range o.rules {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Describe implements prometheus.Collector.
func (o *Offenders) Describe(ch chan<- *prometheus.Desc) { ch <- o.desc }

// Collect implements prometheus.Collector: one gauge per rule and rank up
// to MetricsTop, built at scrape time, so no series outlives its place in
// the ranking.
func (o *Offenders) Collect(ch chan<- prometheus.Metric) {
	for _, rule := range o.Rules() {
		for i, e := range o.Top(rule, o.cfg.MetricsTop) {
			ch <- prometheus.MustNewConstMetric(o.desc, prometheus.GaugeValue, float64(e.Count), rule, strconv.Itoa(i+1), e.Key)
		}
	}
}
