package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/metrics"
)

// Face names a listener role, as used by Server.Addr.
type Face string

const (
	FaceGateway     Face = "gateway"
	FaceAPI         Face = "api"
	FaceForwardAuth Face = "forward_auth"
	FaceAdmin       Face = "admin"
)

// Server is the daemon. Build it with New; it is safe for concurrent use.
type Server struct {
	logger *slog.Logger
	reg    *prometheus.Registry
	m      *daemonMetrics
	eng    *engine.Engine // every door's decisions, for the life of the process

	store     floodgate.Store
	local     floodgate.Store // answers fail-to-local rules while store fails
	ping      func(context.Context) error
	closeFns  []func() error
	transport *http.Transport
	// routeTransports serve gateway.routes, one per timeout (routes.go).
	routeTransports map[time.Duration]*http.Transport

	file  string // reloaded by Reload; "" when built from a Config only
	start *config.Config

	mu       sync.Mutex // serialises Apply and the demo upstream's start
	state    atomic.Pointer[state]
	demo     *demoUpstream
	demoOnly bool // WithDemoUpstream

	servers []*http.Server
	addrs   map[Face]string
	errc    chan error

	rls               *grpcFace             // the envoy_rls gRPC listener (rls.go)
	xds               *rlsRules             // the envoy_rls rules from xDS, and their metrics (xds.go)
	ops               *opsParts             // abuse detection, reductions, dashboard (ops.go)
	pg                *pgTiers              // the PostgreSQL key source, opened once (tiers.go)
	held              reservations          // the API's checks to settle (settle.go)
	tp                trace.TracerProvider  // nil: tracing off (tracing.go)
	spanExp           sdktrace.SpanExporter // WithSpanExporter; nil: OTLP
	decisions         *metrics.Metrics      // declares each rule's series (observe.go)
	gw                *gatewayMetrics
	version, revision string    // floodgate_build_info (WithBuildInfo)
	rlqs              *rlqsFace // the rlqs gRPC listener (rlqs.go)
}

// Option configures a Server.
type Option func(*Server)

// WithLogger sets the logger; default: one built from the config's log
// section, writing to stderr.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.logger = l } }

// WithStore uses store instead of the one the config describes (tests,
// embedding). ping, if not nil, is what /readyz calls.
func WithStore(store floodgate.Store, ping func(context.Context) error) Option {
	return func(s *Server) { s.store, s.ping = store, ping }
}

// WithDemoUpstream makes the gateway proxy to the built-in demo upstream
// whatever gateway.upstream says, in every configuration a reload brings
// too (floodgate serve --demo).
func WithDemoUpstream() Option { return func(s *Server) { s.demoOnly = true } }

// WithRegistry registers the metrics on reg instead of a new registry.
func WithRegistry(reg *prometheus.Registry) Option { return func(s *Server) { s.reg = reg } }

// New builds a Server for cfg: it connects the store (without waiting for
// it: /readyz tells) and compiles the rules. Listening starts with Start or
// Run. cfg.File, when set, is what Reload reads again.
func New(cfg *config.Config, opts ...Option) (*Server, error) {
	s := &Server{file: cfg.File, start: cfg, addrs: map[Face]string{}, errc: make(chan error, 8)}
	for _, o := range opts {
		o(s)
	}
	if s.logger == nil {
		s.logger = NewLogger(cfg.Log, os.Stderr)
	}
	routeRedisLogs(s.logger)
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
		s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if err := s.setupMetrics(); err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	if s.store == nil {
		if err := s.openStore(cfg); err != nil {
			return nil, err
		}
	}
	local, err := newLocalStore()
	if err != nil {
		s.closeStore()
		return nil, err
	}
	s.local = local
	s.closeFns = append(s.closeFns, local.Close)
	s.transport = newTransport()
	if err := s.setupOps(cfg); err != nil {
		s.closeStore()
		return nil, err
	}
	br, err := s.newBreaker(cfg)
	if err != nil {
		s.closeStore()
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	ec := engine.Config{Store: s.store, Local: s.local, Observer: s.decisions, Logger: s.logger, Breaker: br}
	if ec.Tracer, err = s.setupTracing(cfg); err != nil {
		s.closeStore()
		return nil, err
	}
	if o := s.ops; o != nil {
		ec.Observer = engine.Observers{s.decisions, o.detector, o.offenders, o.stats}
		ec.Blocker, ec.Capacity = o.detector, o.red
	}
	if s.eng, err = engine.New(ec); err != nil {
		s.closeStore()
		return nil, err
	}
	st, err := s.build(cfg)
	if err != nil {
		s.closeStore()
		return nil, err
	}
	s.state.Store(st)
	s.warnOpenAdmin(cfg)
	return s, nil
}

// warnOpenAdmin logs, at start and at each reload, an admin listener
// that faces the network without admin.token (docs/DEPLOY.md, "Securing
// Floodgate").
func (s *Server) warnOpenAdmin(cfg *config.Config) {
	if a := cfg.Admin; a.Listen != config.Off && a.Token == "" && !config.Loopback(a.Listen) {
		s.logger.Warn("admin.listen faces the network and admin.token is unset: /metrics answers anyone; the dashboard and the admin reads answer loopback clients only; changes are refused",
			"admin.listen", a.Listen)
	}
}

// Config returns the configuration in force.
func (s *Server) Config() *config.Config { return s.state.Load().cfg }

// Reload reads the configuration file again and applies it. A file that
// fails to load or build is logged and rejected, and the rules in force
// keep serving.
func (s *Server) Reload() error {
	if s.file == "" {
		return errors.New("server: no configuration file to reload")
	}
	cfg, err := config.Load(s.file)
	if err != nil {
		s.m.reloads.WithLabelValues("error").Inc()
		s.logger.Error("configuration rejected; the previous one keeps serving", "file", s.file, "error", err)
		return err
	}
	return s.Apply(cfg)
}

// Apply replaces the rules, policies, keys, headers and upstream with
// cfg's. Listen addresses and the store are fixed at New: changes to them
// are logged and wait for a restart. Requests in flight finish under the
// rules they started with.
func (s *Server) Apply(cfg *config.Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.build(cfg)
	if err != nil {
		s.m.reloads.WithLabelValues("error").Inc()
		s.logger.Error("configuration rejected; the previous one keeps serving", "file", cfg.File, "error", err)
		return err
	}
	for _, w := range append(restartNeeded(s.start, cfg), s.tiersRestart(cfg)...) {
		s.logger.Warn("configuration change needs a restart", "change", w)
	}
	s.warnOpenAdmin(cfg)
	s.state.Store(st)
	s.applyRLQS(cfg)
	s.m.reloads.WithLabelValues("ok").Inc()
	s.m.lastReload.SetToCurrentTime()
	s.logger.Info("configuration applied", "file", cfg.File, "rules", len(cfg.Rules), "policies", len(cfg.Policies))
	return nil
}

func restartNeeded(old, cfg *config.Config) []string {
	var out []string
	addr := func(name string, a, b string) {
		if a != b {
			out = append(out, fmt.Sprintf("%s listen %q -> %q", name, a, b))
		}
	}
	listen := func(c *config.Config) (g, a, f string) {
		if c.Gateway != nil {
			g = c.Gateway.Listen
		}
		if c.API != nil {
			a = c.API.Listen
		}
		if c.ForwardAuth != nil {
			f = c.ForwardAuth.Listen
		}
		return
	}
	og, oa, of := listen(old)
	ng, na, nf := listen(cfg)
	addr("gateway", og, ng)
	addr("api", oa, na)
	addr("forward_auth", of, nf)
	addr("admin", old.Admin.Listen, cfg.Admin.Listen)
	if o, n := old.EnvoyRLS, cfg.EnvoyRLS; (o == nil) != (n == nil) || o != nil && o.Listen != n.Listen {
		out = append(out, "envoy_rls listen")
	} else if o != nil && (!reflect.DeepEqual(o.XDS, n.XDS) || !reflect.DeepEqual(o.TLS, n.TLS) || o.NearLimitRatio != n.NearLimitRatio) {
		out = append(out, "envoy_rls xds, tls or near_limit_ratio")
	}
	// Bound at start: timeouts, caps and TLS; and whether the API listens
	// on loopback only, which having no callers decides.
	if !reflect.DeepEqual(old.Listeners, cfg.Listeners) {
		out = append(out, "listeners")
	}
	if old.API != nil && cfg.API != nil && (len(old.API.Callers) == 0) != (len(cfg.API.Callers) == 0) {
		out = append(out, "api.callers (whether the API listens on loopback only)")
	}
	// Read once, at New: the logger, and the webhook, key display and
	// reduction store of ops (setupOps).
	if old.Log.Level != cfg.Log.Level || old.Log.Format != cfg.Log.Format {
		out = append(out, "log")
	}
	if oo, no := old.Ops, cfg.Ops; !reflect.DeepEqual(oo.Webhook, no.Webhook) || oo.RawKeys != no.RawKeys || oo.Reductions != no.Reductions || oo.FingerprintSecret != no.FingerprintSecret {
		out = append(out, "ops webhook, raw_keys, reductions or fingerprint_secret")
	}
	ost, nst := old.Store, cfg.Store
	// The whole redis section is read once, at New (openStore).
	if ost.Type != nst.Type || ost.Memory != nst.Memory || !reflect.DeepEqual(ost.Redis, nst.Redis) || ost.Breaker != nst.Breaker {
		out = append(out, "store")
	}
	return out
}

// Start listens on every configured address and serves in the background.
// Faces with the same address share one listener.
func (s *Server) Start() error {
	binds := s.binds()
	cfg := s.start
	var lns []net.Listener
	for _, b := range binds {
		ln, err := listen(b.addr, cfg.Listeners, s.logger)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return fmt.Errorf("server: %s: %w", b.faces[0], err)
		}
		lns = append(lns, ln)
		for _, f := range b.faces {
			s.addrs[f] = ln.Addr().String()
		}
	}
	for i, b := range binds {
		gateway := len(b.faces) == 1 && b.faces[0] == FaceGateway
		srv := httpServer(s.handler(b), cfg, gateway, s.logger)
		srv.ConnState = shedding(lns[i])
		s.servers = append(s.servers, srv)
		go func(ln net.Listener) {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.errc <- err
			}
		}(lns[i])
		s.logger.Info("listening", "faces", fmt.Sprint(b.faces), "addr", lns[i].Addr().String())
	}
	if err := s.startRLS(); err != nil {
		return err
	}
	return s.startRLQS()
}

// bind is one listen address and the faces it serves.
type bind struct {
	addr  string
	faces []Face
}

// binds groups the configured faces by listen address. Without callers
// the API answers loopback only, and so does any face sharing its
// listener.
func (s *Server) binds() []*bind {
	cfg := s.start
	var binds []*bind
	add := func(f Face, addr string) {
		for _, b := range binds {
			// ":0" asks for a fresh port each time, so it is never shared.
			if b.addr == addr && !strings.HasSuffix(addr, ":0") {
				b.faces = append(b.faces, f)
				return
			}
		}
		binds = append(binds, &bind{addr: addr, faces: []Face{f}})
	}
	if cfg.Gateway != nil {
		add(FaceGateway, cfg.Gateway.Listen)
	}
	addrOf := func(addr string) string { return addr }
	if cfg.API != nil {
		if to, moved := apiListen(cfg); moved {
			from := cfg.API.Listen
			addrOf = func(addr string) string {
				if addr == from {
					return to
				}
				return addr
			}
			s.logger.Warn("no api.callers configured: the decision API listens on loopback only", "api.listen", from, "addr", to)
		}
		add(FaceAPI, addrOf(cfg.API.Listen))
	}
	if cfg.ForwardAuth != nil {
		add(FaceForwardAuth, addrOf(cfg.ForwardAuth.Listen))
	}
	if cfg.Admin.Listen != config.Off {
		add(FaceAdmin, addrOf(cfg.Admin.Listen))
	}
	return binds
}

// handler serves the faces of one listener: the gateway alone, or the
// others' routes on one mux.
func (s *Server) handler(b *bind) http.Handler {
	if len(b.faces) == 1 && b.faces[0] == FaceGateway {
		return s.traced(http.HandlerFunc(s.serveGateway))
	}
	mux := http.NewServeMux()
	for _, f := range b.faces {
		s.route(mux, f, b.addr)
	}
	// A web page the operator visits could otherwise make the
	// browser POST a check to a listener on loopback, spending a
	// key's quota: a cross-origin POST sent as text/plain needs no
	// preflight. Requests without Sec-Fetch-Site or Origin
	// (services, curl) pass. Forward-auth is exempt: proxies pass
	// the browser's own headers on, and Traefik may keep the
	// original method, so the app's legitimate cross-site POSTs
	// would be refused.
	cop := http.NewCrossOriginProtection()
	cop.AddInsecureBypassPattern("/v1/auth")
	cop.AddInsecureBypassPattern("/v1/auth/nginx")
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusForbidden, "Forbidden", "a cross-origin request from a browser page: refused, so that no page a user visits can spend or change limits")
	}))
	return s.traced(cop.Handler(mux))
}

// route mounts face's endpoints on mux. The API's and the admin's
// answer only allowed Host names (guardHost), the API's only callers with
// the scope (guardAPI), the admin's only the admin token when one is set
// (guardAdmin), except the probes.
func (s *Server) route(mux *http.ServeMux, f Face, addr string) {
	api := func(pattern, scope string, h http.HandlerFunc) {
		mux.Handle(pattern, s.guardHost(addr, s.guardAPI(scope, h)))
	}
	admin := func(pattern string, kind adminEndpoint, h http.Handler) {
		mux.Handle(pattern, s.guardHost(addr, s.guardAdmin(kind, h)))
	}
	switch f {
	case FaceAPI:
		api("POST /v1/check", config.ScopeCheck, s.handleCheck)
		api("POST /v1/settle", config.ScopeCheck, s.handleSettle)
		api("GET /v1/limits/{key...}", config.ScopeRead, s.handlePeek)
		api("DELETE /v1/limits/{key...}", config.ScopeReset, s.handleReset)
	case FaceForwardAuth:
		mux.HandleFunc("/v1/auth", func(w http.ResponseWriter, r *http.Request) { s.handleAuth(w, r, false) })
		mux.HandleFunc("/v1/auth/nginx", func(w http.ResponseWriter, r *http.Request) { s.handleAuth(w, r, true) })
	case FaceAdmin:
		admin("GET /metrics", adminCounts, http.HandlerFunc(s.handleMetrics))
		mux.HandleFunc("GET /healthz", s.handleHealthz)
		mux.HandleFunc("GET /readyz", s.handleReadyz)
		mux.HandleFunc("GET /healthz/store", s.handleStoreHealth)
		admin("POST /-/reload", adminChanges, http.HandlerFunc(s.handleReload))
		if s.ops != nil {
			// Their GETs are read-only (dashboard, top offenders, alerts,
			// reductions); guardAdmin lets admin.read_token no further.
			for _, p := range s.ops.admin.Patterns() {
				admin(p, adminReads, s.ops.admin)
			}
		}
	}
}

// Addr returns the address face listens on after Start ("" if off), with
// the port the system chose for ":0".
func (s *Server) Addr(f Face) string { return s.addrs[f] }

// Errors delivers a listener's failure while serving.
func (s *Server) Errors() <-chan error { return s.errc }

// Shutdown stops accepting connections, waits for requests in flight until
// ctx ends, then closes the demo upstream and the store.
func (s *Server) Shutdown(ctx context.Context) error {
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, srv := range s.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Shutdown(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	s.stopRLS(ctx)
	s.stopRLQS(ctx)
	s.mu.Lock()
	if s.demo != nil {
		s.demo.close()
	}
	s.transport.CloseIdleConnections()
	for _, t := range s.routeTransports {
		t.CloseIdleConnections()
	}
	s.mu.Unlock()
	if err := s.closeStore(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (s *Server) closeStore() error {
	var errs []error
	for _, f := range s.closeFns {
		errs = append(errs, f())
	}
	s.closeFns = nil
	return errors.Join(errs...)
}

// Run starts the server and serves until ctx ends or a listener fails,
// then shuts down within the configuration's shutdown_timeout.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(); err != nil {
		s.closeStore()
		return err
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-s.errc:
		s.logger.Error("listener failed", "error", runErr)
	}
	timeout := s.Config().ShutdownTimeout.D()
	s.logger.Info("shutting down", "deadline", timeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		return errors.Join(runErr, fmt.Errorf("server: shutdown: %w", err))
	}
	return runErr
}

// NewLogger builds the slog logger a config's log section asks for.
func NewLogger(c config.Log, w *os.File) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.Level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
