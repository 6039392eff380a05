// Package metrics counts the engine's decisions in Prometheus: an
// engine.Observer for every door (middleware, gateway, forward-auth, the
// decision API, gRPC), so that one set of series covers all traffic
// (REQUIREMENTS O2). Labels are rule and policy names and verdicts, never
// keys, so cardinality stays bounded by the configuration.
//
//	m, err := metrics.New(prometheus.DefaultRegisterer)
//	eng, err := engine.New(engine.Config{Store: store, Observer: m})
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
)

// Metrics is an engine.Observer that records every Event.
type Metrics struct {
	decisions   *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	cached      *prometheus.HistogramVec
	storeErrors *prometheus.CounterVec
	bypasses    *prometheus.CounterVec
	shadow      *prometheus.CounterVec
	retry       *prometheus.HistogramVec
	throttles   *prometheus.CounterVec
}

// New registers the collectors on reg. It returns the registration
// error, e.g. for a second registration on one registry.
//
// Series: floodgate_decisions_total{rule,policy,outcome} with outcome one
// of allowed, denied, blocked, reduced, unavailable, invalid, rejected,
// bypassed, and shadow_denied for a shadow rule's would-be denials (which
// are served, so they are not "denied"); policy is the refusing limit, ""
// when allowed. floodgate_shadow_denials_total{rule,policy} counts those
// again for dashboards made before the outcome existed.
// floodgate_store_duration_seconds{rule} (store round trips only),
// floodgate_near_cache_duration_seconds{rule} (denials the store answered
// from its near cache, without a round trip), floodgate_store_errors_total{rule}
// (decisions a failure mode answered or the store's failure refused; not those
// whose caller's context ended), floodgate_bypasses_total{rule,reason},
// floodgate_retry_after_seconds{rule} (on refusals) and
// floodgate_throttle_waits_total{rule}.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_decisions_total", Help: "Rate-limit decisions by rule, refusing policy and outcome.",
		}, []string{"rule", "policy", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "floodgate_store_duration_seconds", Help: "Time to get a decision from the store, by round trip; near-cache answers are apart.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}, []string{"rule"}),
		cached: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "floodgate_near_cache_duration_seconds", Help: "Time to answer a denial from the store's near cache, without a round trip.",
			Buckets: []float64{.000001, .0000025, .000005, .00001, .000025, .00005, .0001, .00025, .001},
		}, []string{"rule"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_store_errors_total", Help: "Decisions made while the store failed.",
		}, []string{"rule"}),
		bypasses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_bypasses_total", Help: "Requests let through by a bypass token or allow-listed network.",
		}, []string{"rule", "reason"}),
		shadow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_shadow_denials_total", Help: "Requests a shadow rule would have denied.",
		}, []string{"rule", "policy"}),
		retry: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "floodgate_retry_after_seconds", Help: "Retry-After values sent on refusals.",
			Buckets: []float64{1, 2, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"rule"}),
		throttles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_throttle_waits_total", Help: "Waits made by throttle rules before asking again.",
		}, []string{"rule"}),
	}
	for _, c := range []prometheus.Collector{m.decisions, m.latency, m.cached, m.storeErrors, m.bypasses, m.shadow, m.retry, m.throttles} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Observe implements engine.Observer.
func (m *Metrics) Observe(e engine.Event) {
	if e.Verdict == engine.Bypassed {
		m.bypasses.WithLabelValues(e.Rule, e.Reason).Inc()
		return
	}
	outcome := e.Verdict.String()
	if e.Shadow {
		outcome = "shadow_denied"
		m.shadow.WithLabelValues(e.Rule, e.Policy).Inc()
	}
	m.decisions.WithLabelValues(e.Rule, e.Policy, outcome).Inc()
	if e.Latency > 0 {
		m.latency.WithLabelValues(e.Rule).Observe(e.Latency.Seconds())
	}
	if e.CachedLatency > 0 {
		m.cached.WithLabelValues(e.Rule).Observe(e.CachedLatency.Seconds())
	}
	if e.Degraded || e.Verdict == engine.Unavailable && !e.CallerEnded {
		m.storeErrors.WithLabelValues(e.Rule).Inc()
	}
	if e.Verdict == engine.Denied || e.Verdict == engine.Blocked || e.Verdict == engine.Reduced {
		m.retry.WithLabelValues(e.Rule).Observe(float64(header.Seconds(e.RetryAfter)))
	}
	if e.Waits > 0 {
		m.throttles.WithLabelValues(e.Rule).Add(float64(e.Waits))
	}
}
