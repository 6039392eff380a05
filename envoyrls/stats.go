package envoyrls

import (
	"math"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of StatsOptions.
const (
	DefaultNearLimitRatio = 0.8
	DefaultMaxStatsSeries = 1000
)

// OverflowLabel is the key1 label of the limits counted after
// StatsOptions.MaxSeries label sets are in use.
const OverflowLabel = "_overflow"

// StatsOptions configures Stats.
type StatsOptions struct {
	// NearLimitRatio is the share of a limit past which hits are counted
	// near_limit (envoyproxy/ratelimit's NEAR_LIMIT_RATIO); default 0.8.
	NearLimitRatio float64
	// MaxSeries bounds the (domain, key1, key2) label sets; default
	// DefaultMaxStatsSeries. Limits met after that are counted under
	// domain "" and key1 OverflowLabel.
	MaxSeries int
}

// Stats are envoyproxy/ratelimit's per-limit counters,
// ratelimit_service_rate_limit_{total_hits,over_limit,near_limit,
// within_limit,shadow_mode}, labelled as its Prometheus mapping labels
// them: domain, key1 (the first descriptor entry, key_value or key) and
// key2 (the second; "" for a limit at the first level). They count hits
// (a request's cost), not requests. Labels come from the configuration's
// descriptor paths, never from request values, and at most MaxSeries
// label sets are made.
type Stats struct {
	total, over, near, within, shadow *prometheus.CounterVec
	ratio                             float64
	max                               int
	mu                                sync.Mutex
	series                            map[string]struct{} // limit paths given label sets
}

// NewStats registers the counters on reg. Errors: reg refused one.
func NewStats(reg prometheus.Registerer, opt StatsOptions) (*Stats, error) {
	if !(opt.NearLimitRatio > 0 && opt.NearLimitRatio <= 1) { // NaN too
		opt.NearLimitRatio = DefaultNearLimitRatio
	}
	if opt.MaxSeries <= 0 {
		opt.MaxSeries = DefaultMaxStatsSeries
	}
	s := &Stats{ratio: opt.NearLimitRatio, max: opt.MaxSeries, series: map[string]struct{}{}}
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_service_rate_limit_" + name, Help: help},
			[]string{"domain", "key1", "key2"})
	}
	s.total = vec("total_hits", "Hits (request costs) a limit was asked for.")
	s.over = vec("over_limit", "Hits past a limit, refused (or served, in shadow mode).")
	s.near = vec("near_limit", "Hits past the near-limit ratio of a limit (0.8 by default) and within it.")
	s.within = vec("within_limit", "Hits a limit allowed.")
	s.shadow = vec("shadow_mode", "Hits past a shadow-mode limit, served anyway.")
	for _, c := range []prometheus.Collector{s.total, s.over, s.near, s.within, s.shadow} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// hitCounts is one decision's share of the counters, as
// envoyproxy/ratelimit splits a request's hits around the limit and its
// near-limit threshold.
type hitCounts struct{ total, over, near, within, shadow uint64 }

// count splits hits for a limit of quota that stood at before and
// would stand at before+hits; over says the limit refused them.
func count(quota, before, hits uint64, over, shadowMode bool, ratio float64) hitCounts {
	c := hitCounts{total: hits}
	after := before + hits
	nearAt := uint64(math.Floor(float64(quota) * ratio))
	if !over {
		c.within = hits
		if after > nearAt {
			c.near = after - max(before, nearAt)
		}
		return c
	}
	if before >= quota {
		c.over = hits
	} else {
		c.over = after - quota
		c.near = quota - max(nearAt, before)
	}
	if shadowMode {
		c.shadow = c.over
	}
	return c
}

// observe counts one descriptor's decision under l: remaining is what
// the engine reported (after the hits when allowed, before them when
// refused).
func (s *Stats) observe(l *limit, hits int64, allowed bool, remaining int64) {
	if s == nil || l == nil || l.unlimited {
		return
	}
	q := uint64(max(l.policy.Quota, 0))
	h := uint64(max(hits, 0))
	left := uint64(min(max(remaining, 0), int64(q)))
	before := q - left
	if allowed {
		before = q - min(left+h, q)
	}
	c := count(q, before, h, !allowed, l.shadow, s.ratio)
	labels := s.labels(l)
	for _, p := range []struct {
		vec *prometheus.CounterVec
		n   uint64
	}{{s.total, c.total}, {s.over, c.over}, {s.near, c.near}, {s.within, c.within}, {s.shadow, c.shadow}} {
		if p.n > 0 {
			p.vec.WithLabelValues(labels[:]...).Add(float64(p.n))
		}
	}
}

// labels are l's domain, key1 and key2, within the series bound.
func (s *Stats) labels(l *limit) [3]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.series[l.path]; ok {
		return l.labels
	}
	if len(s.series) >= s.max {
		return [3]string{"", OverflowLabel, ""}
	}
	s.series[l.path] = struct{}{}
	return l.labels
}
