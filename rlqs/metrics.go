package rlqs

import (
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
)

// metrics are the server's Prometheus series, registered when
// Options.Registerer is set.
type metrics struct {
	calls   *prometheus.CounterVec // store calls by result
	streams prometheus.Gauge
	ended   *prometheus.CounterVec // streams the server ended, by gRPC code
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_rlqs_store_calls_total",
			Help: "Leases taken from the store by the rate limit quota service, by result: taken, refused (less was left), error.",
		}, []string{"result"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "floodgate_rlqs_streams",
			Help: "Rate limit quota service streams open.",
		}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_rlqs_streams_refused_total",
			Help: "Rate limit quota service streams ended for bad input, by gRPC code.",
		}, []string{"code"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.calls, m.streams, m.ended} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// refused counts a stream the server ended with err for its input.
func (m *metrics) refused(err error) {
	m.ended.WithLabelValues(status.Code(err).String()).Inc()
}
