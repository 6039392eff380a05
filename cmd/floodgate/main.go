// Command floodgate runs the Floodgate rate-limiting daemon and its tools:
//
//	floodgate serve -c floodgate.yaml     gateway, decision API, forward-auth, admin
//	floodgate validate -c floodgate.yaml  print every configuration error, exit 1 if any
//	floodgate loadtest URL                drive a URL and summarise statuses and Retry-After
//	floodgate probe URL                   show what a response says about its rate limits
//	floodgate reduce --factor 0.5 --for 10m  lower quotas for a while on a running daemon
//	floodgate keys add|list|revoke        API keys of tiered quotas, in PostgreSQL
//	floodgate tiers set|list              tiers (plans) of API keys, in PostgreSQL
//	floodgate version
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version or VCS revision from the build info is used.
var version = ""

func main() {
	if cmd, err := newRoot().ExecuteC(); err != nil {
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
	root.AddCommand(newServe(), newValidate(), newVersion(), newLoadtest(), newProbe(), newReduce(), newKeys(), newTiers())
	root.SetErr(os.Stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintf(c.ErrOrStderr(), "floodgate: %v\n%s", err, c.UsageString())
		return exitError(2)
	})
	// Errors other than exitError are printed once, by report: cobra
	// itself stays silent so that nothing is printed twice.
	return root
}

func versionString() string {
	v := version
	info, ok := debug.ReadBuildInfo()
	if v == "" && ok {
		v = info.Main.Version
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && (v == "" || v == "(devel)") {
				v = "devel-" + s.Value[:min(12, len(s.Value))]
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	goVersion := "unknown"
	if ok {
		goVersion = info.GoVersion
	}
	return fmt.Sprintf("floodgate %s (%s)", v, goVersion)
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return nil
		},
	}
}
