package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/floodgate/floodgate/ops/admin"
	"github.com/floodgate/floodgate/ops/reduce"
)

// newReduce is `floodgate reduce`: temporary capacity reduction through a
// running daemon's admin API (POST/DELETE /v1/admin/reduce).
func newReduce() *cobra.Command {
	var (
		adminURL, token, reason string
		policies                []string
		factor                  float64
		dur                     time.Duration
		end, list               bool
	)
	c := &cobra.Command{
		Use:   "reduce",
		Short: "Lower quotas for a while (e.g. to 50% for 10 minutes) on a running daemon",
		Long: `Reduce the quotas of the named policies (all with "*") to a share of
themselves for a while, through the admin listener of a running daemon.
While it holds, RateLimit-Policy shows the lowered quotas and requests
refused only because of it get 503 temporary-reduced-capacity. It ends by
itself; with a Redis store every replica applies it.

  floodgate reduce --policy api --factor 0.5 --for 10m --reason "db failover"
  floodgate reduce --list
  floodgate reduce --end                 # end every reduction now

The admin token comes from --token or FLOODGATE_ADMIN_TOKEN.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if token == "" {
				token = os.Getenv("FLOODGATE_ADMIN_TOKEN")
			}
			ac := &admin.AdminClient{BaseURL: adminURL, Token: token}
			ctx, cancel := context.WithTimeout(cmdContext(cmd), 10*time.Second)
			defer cancel()
			var (
				out []reduce.Reduction
				err error
			)
			switch {
			case list:
				out, err = ac.Reductions(ctx)
			case end:
				var ps []string
				if cmd.Flags().Changed("policy") {
					ps = policies
				}
				out, err = ac.EndReduce(ctx, ps)
			default:
				if dur <= 0 {
					return fmt.Errorf("--for is required, e.g. --for 10m")
				}
				out, err = ac.Reduce(ctx, admin.ReduceRequest{Policies: policies, Factor: factor, Duration: dur.String(), Reason: reason})
			}
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if len(out) == 0 {
				fmt.Fprintln(w, "no reductions in force")
			}
			for _, r := range out {
				line := fmt.Sprintf("%s\t%g%%\tuntil %s (%s left)", r.Policy, r.Factor*100, r.Until.Local().Format(time.TimeOnly),
					time.Until(r.Until).Round(time.Second))
				if r.Reason != "" {
					line += "\t" + r.Reason
				}
				fmt.Fprintln(w, line)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&adminURL, "admin", "http://127.0.0.1:9090", "admin listener URL of the daemon")
	f.StringVar(&token, "token", "", "admin token (default $FLOODGATE_ADMIN_TOKEN)")
	f.StringSliceVarP(&policies, "policy", "p", []string{reduce.AllPolicies}, `policies to reduce, repeated or comma-separated; "*" for all`)
	f.Float64Var(&factor, "factor", 0.5, "share of each quota kept, between 0 and 1")
	f.DurationVar(&dur, "for", 0, "how long the reduction holds, e.g. 10m")
	f.StringVar(&reason, "reason", "", "shown on the dashboard and logged")
	f.BoolVar(&end, "end", false, "end reductions now (those of --policy, or all)")
	f.BoolVar(&list, "list", false, "list the reductions in force")
	c.MarkFlagsMutuallyExclusive("end", "list")
	return c
}

func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
