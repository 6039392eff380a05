package server

import (
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/metrics"
)

// WithBuildInfo gives floodgate_build_info its version and revision (the
// values floodgate version prints); without it, the binary's build info.
func WithBuildInfo(version, revision string) Option {
	return func(s *Server) { s.version, s.revision = version, revision }
}

// gatewayMetrics are the gateway's RED metrics, per rule and status.
type gatewayMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// setupMetrics registers the decisions' metrics (package metrics), the
// daemon's own and those of registerObservability.
func (s *Server) setupMetrics() error {
	var err error
	if s.decisions, err = metrics.New(s.reg); err != nil {
		return err
	}
	if s.m, err = newMetrics(s.reg); err != nil {
		return err
	}
	return s.registerObservability()
}

// registerObservability registers floodgate_build_info and the gateway's
// RED metrics, and gives the daemon's outcome-labelled series their zero
// values, so that every documented series is there from the start.
func (s *Server) registerObservability() error {
	version, revision, goVersion := s.version, s.revision, "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		goVersion = info.GoVersion
		if version == "" {
			version = info.Main.Version
		}
		for _, kv := range info.Settings {
			if kv.Key == "vcs.revision" && revision == "" {
				revision = kv.Value
			}
		}
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "floodgate_build_info", Help: "Always 1; the labels say which build runs.",
	}, []string{"version", "revision", "goversion"})
	build.WithLabelValues(orUnknown(version), orUnknown(revision), goVersion).Set(1)
	s.gw = &gatewayMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_gateway_requests_total", Help: "Gateway responses by rule (empty for none) and status code, the upstream's or Floodgate's.",
		}, []string{"rule", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "floodgate_gateway_request_duration_seconds", Help: "Gateway request time, from the request to the response's end, by rule.",
			Buckets: prometheus.DefBuckets,
		}, []string{"rule"}),
	}
	for _, c := range []prometheus.Collector{build, s.gw.requests, s.gw.duration} {
		if err := s.reg.Register(c); err != nil {
			return err
		}
	}
	for _, o := range []string{"allowed", "denied", "unavailable", "untrusted", "bad_request", "error"} {
		s.m.auth.WithLabelValues(o)
	}
	for _, r := range []string{"ok", "error"} {
		s.m.reloads.WithLabelValues(r)
	}
	for _, k := range []string{"unreachable", "timeout"} {
		s.m.upstreamErrors.WithLabelValues(k)
	}
	return nil
}

func orUnknown(v string) string {
	if v == "" || v == "(devel)" {
		return "unknown"
	}
	return v
}

// declareRules gives each limiting rule of cfg its decision series and
// its gateway series (the 429 it answers, and its timing).
func (s *Server) declareRules(cfg *config.Config) {
	s.declareGateway("")
	for i, r := range cfg.Rules {
		if r.Skip {
			continue
		}
		var names []string
		for _, p := range cfg.RuleLimits(i).Policies {
			names = append(names, p.Name)
		}
		s.decisions.Declare(r.Name, names)
		s.declareGateway(r.Name)
	}
}

func (s *Server) declareGateway(rule string) {
	s.gw.requests.WithLabelValues(rule, "429")
	s.gw.duration.WithLabelValues(rule)
}

// observeGateway serves a gateway request through h, counting it and its
// time by rule and status, and logging it when log.access is on.
func (s *Server) observeGateway(st *state, h http.Handler, w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusWriter{ResponseWriter: w}
	h.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	took := time.Since(start)
	rule := st.mw.RuleFor(r)
	s.gw.requests.WithLabelValues(rule, strconv.Itoa(rec.status)).Inc()
	s.gw.duration.WithLabelValues(rule).Observe(took.Seconds())
	if st.cfg.Log.Access {
		// The path without its query, which may carry secrets; the client
		// as its fingerprint, as every other record shows keys.
		s.logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", rec.status),
			slog.Float64("duration_ms", float64(took.Microseconds())/1000), slog.String("rule", rule),
			slog.String("client", httplimit.Fingerprint(st.resolver.Key(r))))
	}
}

// statusWriter records the status a handler writes.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
