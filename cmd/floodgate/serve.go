package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/cmd/floodgate/server"
)

func newServe() *cobra.Command {
	var file string
	var demo, noWatch bool
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: gateway, decision API, forward-auth and admin listeners",
		Long: `Run the daemon with the configuration file given by -c.

SIGHUP or a change of the file reloads the rules without a restart; a file
that does not load is logged and the running configuration keeps serving.
SIGTERM or SIGINT shut down gracefully within shutdown_timeout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(file)
			if err != nil {
				var errs config.Errors
				if errors.As(err, &errs) {
					for _, e := range errs {
						fmt.Fprintln(cmd.ErrOrStderr(), e)
					}
					return exitError(1)
				}
				return err
			}
			b := readBuildInfo()
			opts := []server.Option{server.WithBuildInfo(b.Version, b.Commit)}
			if demo {
				if cfg.Gateway == nil {
					return fmt.Errorf("--demo needs a gateway section in %s", file)
				}
				opts = append(opts, server.WithDemoUpstream())
			}
			return serve(cmdContext(cmd), cfg, !noWatch, opts...)
		},
	}
	c.Flags().StringVarP(&file, "config", "c", "floodgate.yaml", "configuration file")
	c.Flags().BoolVar(&demo, "demo", false, "proxy to the built-in demo upstream instead of gateway.upstream")
	c.Flags().BoolVar(&noWatch, "no-watch", false, "do not reload when the file changes (SIGHUP still reloads)")
	return c
}

func serve(ctx context.Context, cfg *config.Config, watch bool, opts ...server.Option) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv, err := server.New(cfg, opts...)
	if err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				srv.Reload()
			}
		}
	}()
	if watch {
		go func() {
			if err := srv.Watch(ctx, 200*time.Millisecond); err != nil {
				server.NewLogger(cfg.Log, os.Stderr).Warn("not watching the configuration file", "error", err)
			}
		}()
	}
	return srv.Run(ctx)
}
