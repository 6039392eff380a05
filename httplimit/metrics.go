package httplimit

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the middleware's Prometheus collectors (REQUIREMENTS O2).
// A nil *Metrics records nothing.
type Metrics struct {
	decisions   *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	storeErrors *prometheus.CounterVec
	bypasses    *prometheus.CounterVec
	shadow      *prometheus.CounterVec
	retry       *prometheus.HistogramVec
	throttles   *prometheus.CounterVec
}

// NewMetrics registers the collectors on reg. Labels are rule and policy
// names, never keys, so cardinality stays bounded by the configuration.
// It returns the registration error, e.g. for a second registration.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_decisions_total", Help: "Rate-limit decisions by rule, denying policy and outcome (allowed or denied).",
		}, []string{"rule", "policy", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "floodgate_store_duration_seconds", Help: "Time to get a decision from the store.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
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
			Name: "floodgate_retry_after_seconds", Help: "Retry-After values sent on 429 responses.",
			Buckets: []float64{1, 2, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"rule"}),
		throttles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_throttle_waits_total", Help: "Waits made by throttle rules before asking again.",
		}, []string{"rule"}),
	}
	for _, c := range []prometheus.Collector{m.decisions, m.latency, m.storeErrors, m.bypasses, m.shadow, m.retry, m.throttles} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) decision(rule, policy, outcome string) {
	if m != nil {
		m.decisions.WithLabelValues(rule, policy, outcome).Inc()
	}
}

func (m *Metrics) storeLatency(rule string, d time.Duration) {
	if m != nil {
		m.latency.WithLabelValues(rule).Observe(d.Seconds())
	}
}

func (m *Metrics) storeError(rule string) {
	if m != nil {
		m.storeErrors.WithLabelValues(rule).Inc()
	}
}

func (m *Metrics) bypass(rule, reason string) {
	if m != nil {
		m.bypasses.WithLabelValues(rule, reason).Inc()
	}
}

func (m *Metrics) shadowDenied(rule, policy string) {
	if m != nil {
		m.shadow.WithLabelValues(rule, policy).Inc()
	}
}

func (m *Metrics) retryAfter(rule string, secs int64) {
	if m != nil {
		m.retry.WithLabelValues(rule).Observe(float64(secs))
	}
}

func (m *Metrics) throttled(rule string) {
	if m != nil {
		m.throttles.WithLabelValues(rule).Inc()
	}
}
