package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/cmd/floodgate/server"
)

// ratelimitName is the name that, as the binary's own (argv[0]), runs the
// ratelimit command: an image that carries the binary as /bin/ratelimit
// replaces envoyproxy/ratelimit's without a change to its Deployment.
const ratelimitName = "ratelimit"

// ratelimitArgs is args with the ratelimit command put first when the
// binary runs under ratelimit's name.
func ratelimitArgs(argv0 string, args []string) []string {
	if filepath.Base(argv0) == ratelimitName {
		return append([]string{ratelimitName}, args...)
	}
	return args
}

func newRatelimit() *cobra.Command {
	return &cobra.Command{
		Use:   ratelimitName,
		Short: "Run as envoyproxy/ratelimit, configured by its environment variables (Envoy Gateway's Deployment)",
		Long: `Run the envoy_rls face configured from envoyproxy/ratelimit's environment
variables, as Envoy Gateway's rate limit Deployment sets them: gRPC on
GRPC_PORT (8081), /healthcheck on PORT (8080), metrics on PROMETHEUS_ADDR
when USE_PROMETHEUS is true, rules from CONFIG_TYPE (FILE: RUNTIME_ROOT;
GRPC_XDS_SOTW: CONFIG_GRPC_XDS_SERVER_URL). The binary run as "ratelimit"
runs this command. docs/ENVOY.md maps every variable.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := ratelimitEnv(os.LookupEnv, os.Environ())
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmdContext(cmd), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return runRatelimit(ctx, env)
		},
	}
}

// rlMode is the daemon run as ratelimit: the server and /healthcheck.
type rlMode struct {
	env         *rlEnv
	srv         *server.Server
	health      *http.Server
	healthAddr  string
	terminating atomic.Bool
}

// startRatelimit builds and starts the daemon env describes. logger nil
// is the one the configuration's log section asks for.
func startRatelimit(env *rlEnv, logger *slog.Logger) (*rlMode, error) {
	cfg, err := config.Parse("(ratelimit environment)", env.yaml)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = server.NewLogger(cfg.Log, os.Stderr)
	}
	for _, w := range env.warnings {
		logger.Warn(w)
	}
	srv, err := server.New(cfg, server.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	m := &rlMode{env: env, srv: srv}
	ln, err := net.Listen("tcp", env.health)
	if err != nil {
		return nil, fmt.Errorf("healthcheck: %w", err)
	}
	m.healthAddr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthcheck", m.healthcheck)
	m.health = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if err := srv.Start(); err != nil {
		ln.Close()
		return nil, err
	}
	go m.health.Serve(ln)
	// The server logs its own listeners; this one is ratelimit's PORT.
	logger.Info("listening", "faces", []string{"healthcheck"}, "addr", m.healthAddr)
	return m, nil
}

// healthcheck answers as ratelimit's /healthcheck: 200 "OK" while
// serving; 503 after SIGTERM, and before the first rules when
// FORCE_START_WITHOUT_INITIAL_CONFIG is false (xDS) or
// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED is true.
func (m *rlMode) healthcheck(w http.ResponseWriter, _ *http.Request) {
	ready := m.srv.RLSReady()
	if m.terminating.Load() || (!ready && (!m.env.forceStart || m.env.needConfig)) {
		http.Error(w, "not serving", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("OK"))
}

// terminate fails /healthcheck at once, so the endpoint leaves the
// Service while calls in flight finish.
func (m *rlMode) terminate() { m.terminating.Store(true) }

// shutdown stops the daemon within its shutdown_timeout, then the
// healthcheck listener.
func (m *rlMode) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), m.srv.Config().ShutdownTimeout.D())
	defer cancel()
	err := m.srv.Shutdown(ctx)
	return errors.Join(err, m.health.Shutdown(ctx))
}

// runRatelimit serves until ctx ends (SIGTERM), then shuts down.
func runRatelimit(ctx context.Context, env *rlEnv) error {
	m, err := startRatelimit(env, nil)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case err = <-m.srv.Errors():
	}
	m.terminate()
	return errors.Join(err, m.shutdown())
}
