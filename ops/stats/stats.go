package stats

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/floodgate/floodgate/engine"
)

// Config configures NewStats.
type Config struct {
	// Step is the resolution of the series; default 5s.
	Step time.Duration
	// Span is how far back the series go; default 10m. Memory is about
	// Span/Step × 9 KiB.
	Span time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Stats keeps the last minutes of decisions for the dashboard: per rule and
// step, allowed, limited, blocked, reduced-capacity and shadow counts; the
// Retry-After distribution; and latency quantiles of store round trips and,
// apart, of the store's near-cache answers (engine.Event.CachedLatency),
// which take microseconds and would hide the round trips' tail. It is an
// engine.Observer, which sees blocked requests too.
type Stats struct {
	step   time.Duration
	nslots int
	now    func() time.Time
	shards [4]statShard
}

// statShard is one of several independent rings; an event goes to a
// random one, so concurrent requests rarely wait on the same lock.
type statShard struct {
	mu    sync.Mutex
	slots []statSlot
}

type statSlot struct {
	epoch   int64 // step number (time / Step) this slot holds; -1 when unused
	rules   map[string]*counts
	retry   [len(retryBounds) + 1]uint64
	latency [latencyBuckets]uint32
	cached  [latencyBuckets]uint32
}

type counts struct{ allowed, limited, blocked, reduced, shadow uint64 }

// retryBounds are the upper bounds (seconds) of the Retry-After buckets,
// the same as the middleware's floodgate_retry_after_seconds histogram.
var retryBounds = [...]int64{1, 2, 5, 10, 30, 60, 300, 900, 3600}

// NewStats returns an empty Stats.
func NewStats(cfg Config) *Stats {
	if cfg.Step <= 0 {
		cfg.Step = 5 * time.Second
	}
	if cfg.Span < cfg.Step {
		cfg.Span = max(10*time.Minute, cfg.Step)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Stats{step: cfg.Step, nslots: int(cfg.Span / cfg.Step), now: cfg.Now}
	for i := range s.shards {
		s.shards[i].slots = make([]statSlot, s.nslots)
		for j := range s.shards[i].slots {
			s.shards[i].slots[j].epoch = -1
		}
	}
	return s
}

// slot returns the slot of the current step in sh, cleared if it held an
// older step. Called with sh.mu held.
func (s *Stats) slot(sh *statShard, epoch int64) *statSlot {
	sl := &sh.slots[epoch%int64(s.nslots)]
	if sl.epoch != epoch {
		sl.epoch = epoch
		clear(sl.rules)
		sl.retry = [len(retryBounds) + 1]uint64{}
		sl.latency = [latencyBuckets]uint32{}
		sl.cached = [latencyBuckets]uint32{}
	}
	if sl.rules == nil {
		sl.rules = make(map[string]*counts)
	}
	return sl
}

func (sl *statSlot) rule(name string) *counts {
	c := sl.rules[name]
	if c == nil {
		c = &counts{}
		sl.rules[name] = c
	}
	return c
}

// lockSlot locks a random shard and returns it with the slot of the
// current step; the caller unlocks sh.mu.
func (s *Stats) lockSlot() (*statShard, *statSlot) {
	epoch := s.now().UnixNano() / int64(s.step)
	sh := &s.shards[rand.Uint32()%uint32(len(s.shards))]
	sh.mu.Lock()
	return sh, s.slot(sh, epoch)
}

// Observe records one decision.
func (s *Stats) Observe(e engine.Event) {
	switch e.Verdict {
	case engine.Allowed, engine.Denied, engine.Reduced, engine.Blocked:
	default:
		return // not a limit's decision: a failure, a bad request, a bypass
	}
	sh, sl := s.lockSlot()
	c := sl.rule(e.Rule)
	switch {
	case e.Shadow:
		c.shadow++
	case e.Verdict == engine.Allowed:
		c.allowed++
	case e.Verdict == engine.Reduced:
		c.reduced++
	case e.Verdict == engine.Blocked:
		c.blocked++
	default:
		c.limited++
	}
	if e.Verdict != engine.Allowed {
		secs := max(1, int64(math.Ceil(e.RetryAfter.Seconds())))
		i := 0
		for i < len(retryBounds) && secs > retryBounds[i] {
			i++
		}
		sl.retry[i]++
	}
	if e.Latency > 0 {
		sl.latency[latencyBucket(e.Latency)]++
	}
	if e.CachedLatency > 0 {
		sl.cached[latencyBucket(e.CachedLatency)]++
	}
	sh.mu.Unlock()
}

// Totals are decision counts over a span.
type Totals struct {
	Allowed uint64 `json:"allowed"`
	Limited uint64 `json:"limited"` // 429 quota-exceeded
	Blocked uint64 `json:"blocked"` // 429 abnormal-usage-detected
	Reduced uint64 `json:"reduced"` // 503 temporary-reduced-capacity
	Shadow  uint64 `json:"shadow"`  // denied by a shadow rule, served anyway
	// RefusedShare is (Limited+Blocked+Reduced) / all decisions; 0 when
	// there were none.
	RefusedShare float64 `json:"refused_share"`
}

func (t *Totals) add(c *counts) {
	t.Allowed += c.allowed
	t.Limited += c.limited
	t.Blocked += c.blocked
	t.Reduced += c.reduced
	t.Shadow += c.shadow
}

func (t *Totals) finish() {
	refused := t.Limited + t.Blocked + t.Reduced
	if all := refused + t.Allowed + t.Shadow; all > 0 {
		t.RefusedShare = float64(refused) / float64(all)
	}
}

// RuleSeries is one rule's counts per step, oldest first.
type RuleSeries struct {
	Rule    string   `json:"rule"`
	Allowed []uint64 `json:"allowed"`
	Limited []uint64 `json:"limited"`
	Blocked []uint64 `json:"blocked"`
	Reduced []uint64 `json:"reduced"`
	Shadow  []uint64 `json:"shadow"`
	Totals  Totals   `json:"totals"`
}

// RetryBucket counts refusals whose Retry-After was at most LE seconds
// (and above the previous bucket's); LE 0 is the overflow bucket.
type RetryBucket struct {
	LE    int64  `json:"le"`
	Label string `json:"label"`
	Count uint64 `json:"count"`
}

// Quantiles are latencies in milliseconds; nil when there was no sample.
type Quantiles struct {
	P50 *float64 `json:"p50"`
	P95 *float64 `json:"p95"`
	P99 *float64 `json:"p99"`
	N   uint64   `json:"n"`
}

// Snapshot is what the dashboard draws.
type Snapshot struct {
	// Now is when the snapshot was taken; Step the series' resolution.
	Now         time.Time `json:"now"`
	StepSeconds float64   `json:"step_seconds"`
	// Times are the start of each step in Unix milliseconds, oldest first;
	// every series has one value per entry.
	Times      []int64       `json:"times"`
	Rules      []RuleSeries  `json:"rules"`
	Totals     Totals        `json:"totals"`
	RetryAfter []RetryBucket `json:"retry_after"`
	// Latency holds the store round trips' quantiles, CachedLatency those
	// of the near cache's answers.
	Latency       LatencySeries `json:"latency"`
	CachedLatency LatencySeries `json:"cached_latency"`
}

// LatencySeries holds latency quantiles per step and over the whole span.
type LatencySeries struct {
	Steps   []Quantiles `json:"steps"`
	Overall Quantiles   `json:"overall"`
}

// latencyHists are one kind of latency's histograms while merging the
// shards: per step and over the span.
type latencyHists struct {
	steps   [][latencyBuckets]uint64
	overall [latencyBuckets]uint64
}

func (h *latencyHists) add(at int, sl *[latencyBuckets]uint32) {
	for k, v := range sl {
		h.steps[at][k] += uint64(v)
		h.overall[k] += uint64(v)
	}
}

func (h *latencyHists) series() LatencySeries {
	out := LatencySeries{Steps: make([]Quantiles, len(h.steps)), Overall: quantiles(&h.overall)}
	for i := range h.steps {
		out.Steps[i] = quantiles(&h.steps[i])
	}
	return out
}

// Snapshot merges every shard into series over the span ending now.
func (s *Stats) Snapshot() Snapshot {
	now := s.now()
	cur := now.UnixNano() / int64(s.step)
	first := cur - int64(s.nslots) + 1
	n := s.nslots
	out := Snapshot{Now: now.UTC(), StepSeconds: s.step.Seconds(), Times: make([]int64, n)}
	for i := range n {
		out.Times[i] = time.Unix(0, (first+int64(i))*int64(s.step)).UnixMilli()
	}
	rules := map[string]*RuleSeries{}
	var retry [len(retryBounds) + 1]uint64
	store := latencyHists{steps: make([][latencyBuckets]uint64, n)}
	cached := latencyHists{steps: make([][latencyBuckets]uint64, n)}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for j := range sh.slots {
			sl := &sh.slots[j]
			if sl.epoch < first || sl.epoch > cur {
				continue
			}
			at := int(sl.epoch - first)
			for name, c := range sl.rules {
				rs := rules[name]
				if rs == nil {
					rs = &RuleSeries{Rule: name, Allowed: make([]uint64, n), Limited: make([]uint64, n),
						Blocked: make([]uint64, n), Reduced: make([]uint64, n), Shadow: make([]uint64, n)}
					rules[name] = rs
				}
				rs.Allowed[at] += c.allowed
				rs.Limited[at] += c.limited
				rs.Blocked[at] += c.blocked
				rs.Reduced[at] += c.reduced
				rs.Shadow[at] += c.shadow
				rs.Totals.add(c)
				out.Totals.add(c)
			}
			for k, v := range sl.retry {
				retry[k] += v
			}
			store.add(at, &sl.latency)
			cached.add(at, &sl.cached)
		}
		sh.mu.Unlock()
	}
	for _, rs := range rules {
		rs.Totals.finish()
		out.Rules = append(out.Rules, *rs)
	}
	slices.SortFunc(out.Rules, func(a, b RuleSeries) int { return strings.Compare(a.Rule, b.Rule) })
	out.Totals.finish()
	for i, c := range retry {
		b := RetryBucket{Count: c}
		if i < len(retryBounds) {
			b.LE = retryBounds[i]
			b.Label = "≤" + formatSeconds(retryBounds[i])
		} else {
			b.Label = ">" + formatSeconds(retryBounds[len(retryBounds)-1])
		}
		out.RetryAfter = append(out.RetryAfter, b)
	}
	out.Latency, out.CachedLatency = store.series(), cached.series()
	return out
}

func formatSeconds(s int64) string {
	switch {
	case s >= 3600 && s%3600 == 0:
		return strconv.FormatInt(s/3600, 10) + "h"
	case s >= 60 && s%60 == 0:
		return strconv.FormatInt(s/60, 10) + "m"
	}
	return strconv.FormatInt(s, 10) + "s"
}

// Latency histogram: log-linear buckets, 8 per power of two of
// nanoseconds, so a bucket is at most 12.5% wide and a quantile read at its
// middle is within about 6% of the true value; durations from 0 to 2^36 ns
// (69 s), longer ones land in the last bucket.
const (
	latencySub     = 8
	latencyMaxExp  = 36
	latencyBuckets = latencySub * (latencyMaxExp - 2)
)

func latencyBucket(d time.Duration) int {
	v := uint64(d)
	if v < latencySub {
		return int(v)
	}
	e := bits.Len64(v) - 1 // 2^e ≤ v < 2^(e+1), e ≥ 3
	if e >= latencyMaxExp {
		return latencyBuckets - 1
	}
	sub := (v >> (e - 3)) & (latencySub - 1)
	return latencySub*(e-2) + int(sub)
}

// latencyBounds returns bucket i's range [lo, hi) in nanoseconds.
func latencyBounds(i int) (lo, hi float64) {
	if i < latencySub {
		return float64(i), float64(i + 1)
	}
	e := i/latencySub + 2
	sub := uint64(i % latencySub)
	return float64((latencySub + sub) << (e - 3)), float64((latencySub + sub + 1) << (e - 3))
}

func quantiles(h *[latencyBuckets]uint64) Quantiles {
	var n uint64
	for _, c := range h {
		n += c
	}
	q := Quantiles{N: n}
	if n == 0 {
		return q
	}
	at := func(p float64) *float64 {
		rank := uint64(math.Ceil(p * float64(n)))
		var cum uint64
		for i, c := range h {
			cum += c
			if cum >= rank {
				lo, hi := latencyBounds(i)
				ms := (lo + hi) / 2 / 1e6
				return &ms
			}
		}
		return nil
	}
	q.P50, q.P95, q.P99 = at(0.50), at(0.95), at(0.99)
	return q
}
