// Command floodgate runs the Floodgate rate-limiting daemon and its tools:
//
//	floodgate serve -c floodgate.yaml     gateway, decision API, forward-auth, admin
//	floodgate validate -c floodgate.yaml  print every configuration error, exit 1 if any
//	floodgate loadtest URL                drive a URL and summarise statuses and Retry-After
//	floodgate probe URL                   show what a response says about its rate limits
//	floodgate reduce --factor 0.5 --for 10m  lower quotas for a while on a running daemon
//	floodgate keys add|list|revoke        API keys of tiered quotas, in PostgreSQL
//	floodgate tiers set|list              tiers (plans) of API keys, in PostgreSQL
//	floodgate healthcheck [URL]             exit 0 when the admin listener answers /healthz
//	floodgate fingerprint --rule R KEY    a key's partition key and the fingerprint dashboards show
//	floodgate version                     version, commit and build date
//	floodgate ratelimit                   envoyproxy/ratelimit's environment (also: the binary run as "ratelimit")
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := newRoot()
	root.SetArgs(ratelimitArgs(os.Args[0], os.Args[1:]))
	if cmd, err := root.ExecuteC(); err != nil {
		report(cmd, err)
		os.Exit(exitCode(err))
	}
}

// report prints err once, naming the command that failed however deeply
// it is nested ("floodgate keys add: …"). An exitError was printed by its
// command already.
func report(cmd *cobra.Command, err error) {
	if _, ok := err.(exitError); ok {
		return
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", cmd.CommandPath(), err)
}

// exitError carries an exit status without printing anything more.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func exitCode(err error) int {
	if e, ok := err.(exitError); ok {
		return int(e)
	}
	return 1
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "floodgate",
		Short:         "Rate limiting in front of any HTTP service",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServe(), newValidate(), newVersion(), newHealthcheck(), newLoadtest(), newProbe(), newReduce(), newKeys(), newTiers(), newRatelimit(), newFingerprint())
	root.SetErr(os.Stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintf(c.ErrOrStderr(), "floodgate: %v\n%s", err, c.UsageString())
		return exitError(2)
	})
	// Errors other than exitError are printed once, by report: cobra
	// itself stays silent so that nothing is printed twice.
	return root
}
