package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

// defaultHealthURL is the admin listener's liveness endpoint at its
// default address.
const defaultHealthURL = "http://127.0.0.1:9090/healthz"

// newHealthcheck is what a container's HEALTHCHECK runs: a minimal image
// has no curl, so the binary checks itself.
func newHealthcheck() *cobra.Command {
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "healthcheck [URL]",
		Short: "Exit 0 if URL (default " + defaultHealthURL + ") answers 200, 1 otherwise",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			url := defaultHealthURL
			if len(args) == 1 {
				url = args[0]
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return healthcheck(ctx, url)
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "give up after this long")
	return c
}

// healthcheck GETs url and fails unless the answer is 200. It ignores
// HTTP_PROXY: the daemon checked is the one beside it.
func healthcheck(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}
