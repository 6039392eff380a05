package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/ops/admin"
	"github.com/floodgate/floodgate/ops/detect"
	"github.com/floodgate/floodgate/ops/reduce"
	"github.com/floodgate/floodgate/ops/stats"
	"github.com/floodgate/floodgate/ops/top"
)

// opsParts are the operations features (the ops/ packages): built once at New,
// their abuse rules updated by every Apply.
type opsParts struct {
	stats     *stats.Stats
	offenders *top.Offenders
	detector  *detect.Detector
	red       *reduce.Reductions
	admin     *admin.Admin
}

// setupOps builds the operations features for cfg and registers their
// metrics. Reductions live in Redis when ops.reductions says so, through
// a client of their own, so every replica sees them.
func (s *Server) setupOps(cfg *config.Config) error {
	if secret := cfg.Ops.FingerprintSecret; secret != "" {
		httplimit.SetFingerprintSecret([]byte(secret))
	}
	o := &opsParts{
		stats:     stats.NewStats(stats.Config{}),
		offenders: top.NewOffenders(top.OffendersConfig{RawKeys: cfg.Ops.RawKeys}),
	}
	def, rules := abuseRules(cfg)
	dc := detect.DetectorConfig{
		Default: def, Rules: rules, RawKeys: cfg.Ops.RawKeys,
		Logger: s.logger, Registerer: s.reg,
	}
	if w := cfg.Ops.Webhook; w.URL != "" {
		dc.Webhook = &detect.WebhookConfig{URL: w.URL, Headers: w.Headers, Timeout: w.Timeout.D(), Attempts: w.Attempts}
	}
	var err error
	if o.detector, err = detect.NewDetector(dc); err != nil {
		return fmt.Errorf("server: abuse detection: %w", err)
	}
	s.closeFns = append(s.closeFns, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return o.detector.Close(ctx)
	})
	rc := reduce.ReductionsConfig{Logger: s.logger}
	open, ok := reductionStores[cfg.Ops.Reductions]
	if !ok { // validation refuses it first
		return fmt.Errorf("server: unknown reductions backend %q", cfg.Ops.Reductions)
	}
	if rc.Store, err = open(s, cfg.Store); err != nil {
		return err
	}
	o.red = reduce.NewReductions(rc)
	s.closeFns = append(s.closeFns, func() error { o.red.Close(); return nil })
	for _, c := range []interface {
		Describe(chan<- *prometheus.Desc)
		Collect(chan<- prometheus.Metric)
	}{o.offenders, o.red} {
		if err := s.reg.Register(c); err != nil {
			return fmt.Errorf("server: metrics: %w", err)
		}
	}
	o.admin = admin.NewAdmin(admin.Config{
		Detector: o.detector, Offenders: o.offenders, Stats: o.stats, Reductions: o.red,
		KnownPolicies: func() []string { return sortedNames(s.state.Load().policies) },
		Authorize:     func(w http.ResponseWriter, r *http.Request) bool { return s.authorized(w, r, s.state.Load()) },
		Logger:        s.logger,
	})
	s.ops = o
	return nil
}

// abuseRules maps the configuration's abuse sections to the detector's.
func abuseRules(cfg *config.Config) (detect.AbuseRule, map[string]detect.AbuseRule) {
	conv := func(a config.Abuse, part int) detect.AbuseRule {
		r := detect.AbuseRule{Threshold: a.Threshold, Window: a.Window.D(), Block: a.Block.D(), Off: a.Off}
		if part >= 0 {
			r.Key = detect.KeyPart(part)
		}
		return r
	}
	rules := map[string]detect.AbuseRule{}
	for i, r := range cfg.Rules {
		if !r.Skip {
			rules[r.Name] = conv(cfg.AbuseFor(i), cfg.AbuseKeyPart(i))
		}
	}
	return conv(cfg.Ops.Abuse, -1), rules
}

// abuseHooks brings the detector's rules up to date with cfg.
func (s *Server) abuseHooks(cfg *config.Config) error {
	if s.ops == nil {
		return nil
	}
	def, rules := abuseRules(cfg)
	if err := s.ops.detector.SetRules(def, rules); err != nil {
		return fmt.Errorf("server: abuse detection: %w", err)
	}
	return nil
}
