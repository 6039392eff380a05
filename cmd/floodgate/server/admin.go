package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the daemon's own collectors, next to the middleware's.
type daemonMetrics struct {
	checks         *prometheus.CounterVec
	checkAllowed   prometheus.Counter // checks' children, resolved once for the hot path
	checkDenied    prometheus.Counter
	checkErrors    prometheus.Counter
	auth           *prometheus.CounterVec
	reloads        *prometheus.CounterVec
	lastReload     prometheus.Gauge
	upstreamErrors *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*daemonMetrics, error) {
	m := &daemonMetrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_api_checks_total", Help: "Decision API checks by outcome (allowed, denied, error).",
		}, []string{"outcome"}),
		auth: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_forward_auth_total", Help: "Forward-auth answers by outcome (allowed, denied, unavailable, untrusted, bad_request, error).",
		}, []string{"outcome"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_config_reloads_total", Help: "Configuration reloads by result (ok, error).",
		}, []string{"result"}),
		lastReload: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "floodgate_config_last_reload_success_timestamp_seconds", Help: "When a configuration was last applied (Unix seconds).",
		}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_upstream_errors_total", Help: "Gateway requests the upstream failed, by kind (unreachable, timeout).",
		}, []string{"kind"}),
	}
	for _, c := range []prometheus.Collector{m.checks, m.auth, m.reloads, m.lastReload, m.upstreamErrors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.lastReload.SetToCurrentTime()
	m.checkAllowed = m.checks.WithLabelValues("allowed")
	m.checkDenied = m.checks.WithLabelValues("denied")
	m.checkErrors = m.checks.WithLabelValues("error")
	return m, nil
}

// handleMetrics serves the Prometheus metrics (behind guardAdmin).
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

func (s *Server) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
}

// handleReload reloads the configuration file, as SIGHUP does; it needs
// the admin token.
func (s *Server) handleReload(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, s.state.Load()) {
		return
	}
	if err := s.Reload(); err != nil {
		writeProblem(w, http.StatusUnprocessableEntity, "Configuration Rejected", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, []byte(`{"reloaded":true}`))
}
