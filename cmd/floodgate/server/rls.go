package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/envoyrls"
)

// FaceEnvoyRLS is Envoy's rate limit service, a gRPC listener of its own.
const FaceEnvoyRLS Face = "envoy_rls"

// rlsService is the gRPC service name the health service reports on.
const rlsService = "envoy.service.ratelimit.v3.RateLimitService"

// rlsStreamWorkers is the envoy_rls server's grpc.NumStreamWorkers: as
// many calls in flight as Envoys commonly keep open at once (64 measured
// as good as 256, and better than 2 or 16).
const rlsStreamWorkers = 64

// buildRLS compiles the envoy_rls descriptors of cfg's files and of the
// xDS snapshot in force into one tree on the daemon's engine (a domain in
// both is refused); nil when the face is off. It runs under s.mu, or in
// New before anything else. A load of files is counted in
// ratelimit_service_config_load_*; applyXDS counts its snapshots.
func (s *Server) buildRLS(cfg *config.Config) (*envoyrls.Rules, error) {
	if cfg.EnvoyRLS == nil {
		return nil, nil
	}
	r, err := s.rulesFor(cfg)
	if cfg.EnvoyRLS.Limits != nil {
		s.xds.count(err)
	}
	return r, err
}

// rulesFor is buildRLS without the count.
func (s *Server) rulesFor(cfg *config.Config) (*envoyrls.Rules, error) {
	if s.xds == nil {
		x, err := newRLSRules(s.reg)
		if err != nil {
			return nil, fmt.Errorf("server: envoy_rls: metrics: %w", err)
		}
		s.xds = x
	}
	all := &envoyrls.Config{Domains: s.xds.domains, PostCharge: cfg.EnvoyRLS.PostCharge}
	if l := cfg.EnvoyRLS.Limits; l != nil {
		all.Domains = append(append([]*envoyrls.Domain(nil), l.Domains...), s.xds.domains...)
	}
	// Validated as envoyrls.Load validates files, then compiled.
	if err := all.Validate(); err != nil {
		return nil, fmt.Errorf("server: envoy_rls: %w", err)
	}
	r, err := envoyrls.Compile(s.eng, all, cfg.Store.FailureMode)
	if err != nil {
		return nil, fmt.Errorf("server: envoy_rls: %w", err)
	}
	s.warnPostCharge(all)
	return r, nil
}

// warnPostCharge warns of each domain envoy_rls.post_charge names that
// no rule file or xDS snapshot has. It is not an error: a reload or a
// snapshot may bring the domain later, and the ratelimit entrypoint names
// Envoy Gateway's domains before any rule has them.
func (s *Server) warnPostCharge(all *envoyrls.Config) {
	for _, d := range all.PostCharge {
		if d == "*" || slices.ContainsFunc(all.Domains, func(x *envoyrls.Domain) bool { return x.Domain == d }) {
			continue
		}
		s.logger.Warn("envoy_rls.post_charge names a domain no rule file or xDS snapshot has; its limits will be post-charged once one brings it", "domain", d)
	}
}

// startRLS listens on envoy_rls.listen with the rate limit service,
// grpc.health.v1 and server reflection. The service reads the Rules of
// the state in force at each request, so a reload swaps them.
func (s *Server) startRLS() error {
	e := s.start.EnvoyRLS
	if e == nil {
		return nil
	}
	style := e.Headers
	stats, err := envoyrls.NewStats(s.reg, envoyrls.StatsOptions{NearLimitRatio: e.NearLimitRatio})
	if err != nil {
		return fmt.Errorf("server: envoy_rls: metrics: %w", err)
	}
	opt := envoyrls.Options{
		Fields:         engine.Fields{Style: style, Reset: s.state.Load().fields.Reset, WarnAt: s.state.Load().fields.WarnAt},
		MaxDescriptors: e.MaxDescriptors, MaxKeyLength: e.MaxKeyLength, Registerer: s.reg, Logger: s.logger,
		DynamicMetadata: e.DynamicMetadata,
		Stats:           stats,
	}
	if e.LimitHeaders {
		opt.LimitHeaders = &envoyrls.LimitHeaders{}
	}
	svc, err := envoyrls.NewService(func() *envoyrls.Rules { return s.state.Load().rls.Load() }, opt)
	if err != nil {
		return err
	}
	// envoy_rls.tls, else listeners.tls, is the service's transport security.
	lc := s.start.Listeners
	if e.TLS != nil {
		lc.TLS = e.TLS
	}
	ln, err := listen(e.Listen, lc, s.logger)
	if err != nil {
		return fmt.Errorf("server: %s: %w", FaceEnvoyRLS, err)
	}
	// The service's own codec reads and writes its two messages without
	// reflection (envoyrls.ServerCodec); health and reflection keep grpc's.
	// Calls run on rlsStreamWorkers long-lived goroutines (more at once
	// each get a new one, as without the option), whose stacks have grown
	// once: a new goroutine per call grew its stack on every call, half
	// the instructions of a decision (docs/BENCHMARKS.md).
	s.rls = s.serveGRPC(FaceEnvoyRLS, rlsService, ln, svc.Register, envoyrls.ServerCodec(), grpc.NumStreamWorkers(rlsStreamWorkers))
	if e.XDS != nil {
		s.startXDS(e.XDS)
	}
	return nil
}

// stopRLS reports NOT_SERVING, lets calls in flight finish until ctx ends,
// then closes the connections left.
func (s *Server) stopRLS(ctx context.Context) {
	f := s.rls
	if f == nil {
		return
	}
	s.stopXDS()
	f.health.Shutdown()
	done := make(chan struct{})
	go func() { f.g.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		f.g.Stop()
	}
}

// watchRLS reloads the configuration when a file of envoy_rls.config
// changes, until ctx ends, as Watch does for the configuration file.
func (s *Server) watchRLS(ctx context.Context, debounce time.Duration) {
	e := s.start.EnvoyRLS
	if e == nil || e.Config == "" {
		return
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		s.logger.Warn("watching envoy_rls.config", "error", err)
		return
	}
	defer w.Close()
	path := e.ConfigPath(s.file)
	dir := path
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
		dir = filepath.Dir(path)
	}
	if err := w.Add(dir); err != nil {
		s.logger.Warn("watching envoy_rls.config", "error", err)
		return
	}
	var timer *time.Timer
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename|fsnotify.Remove) == 0 {
				continue
			}
			if timer != nil {
				timer.Stop()
			}
			timer = time.AfterFunc(debounce, func() {
				s.logger.Info("envoy_rls.config changed; reloading", "path", path)
				s.Reload()
			})
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			s.logger.Warn("watching envoy_rls.config", "error", err)
		}
	}
}
