package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
)

func newValidate() *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "validate [-c] [FILE]",
		Short: "Check a configuration file, printing every error as file:line: field: message",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 { // the file named without -c, as most checkers take it
				if cmd.Flags().Changed("config") {
					return fmt.Errorf("give the file once: -c %s or %s", file, args[0])
				}
				file = args[0]
			}
			cfg, err := config.Load(file)
			if err != nil {
				var errs config.Errors
				if !errors.As(err, &errs) {
					return err
				}
				for _, e := range errs {
					fmt.Fprintln(cmd.ErrOrStderr(), e)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%d error(s)\n", len(errs))
				return exitError(1)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok: %s\n", file, summary(cfg))
			return nil
		},
	}
	c.Flags().StringVarP(&file, "config", "c", "floodgate.yaml", "configuration file")
	return c
}

func summary(c *config.Config) string {
	var faces []string
	if c.Gateway != nil {
		faces = append(faces, fmt.Sprintf("gateway %s -> %s", c.Gateway.Listen, redacted(c.Gateway.Upstream)))
	}
	if c.API != nil {
		faces = append(faces, "api "+c.API.Listen)
	}
	if c.ForwardAuth != nil {
		faces = append(faces, "forward_auth "+c.ForwardAuth.Listen)
	}
	if e := c.EnvoyRLS; e != nil {
		faces = append(faces, "envoy_rls "+e.Listen+envoyDomains(e))
	}
	if c.RLQS != nil {
		faces = append(faces, "rlqs "+c.RLQS.Listen)
	}
	if c.Admin.Listen != config.Off {
		faces = append(faces, "admin "+c.Admin.Listen)
	}
	return fmt.Sprintf("%d policies, %d rules, %s store; %s", len(c.Policies), len(c.Rules), c.Store.Type, strings.Join(faces, ", "))
}

// redacted is a URL without its password or query, which may hold a
// credential: what validate prints goes to terminals and CI logs.
func redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	return u.Redacted()
}

// envoyDomains names the domains the envoy_rls files hold, and whether
// more come over xDS, e.g. " (domains: edge, api; more over xDS)".
func envoyDomains(e *config.EnvoyRLS) string {
	var names []string
	if e.Limits != nil {
		for _, d := range e.Limits.Domains {
			names = append(names, d.Domain)
		}
	}
	list := "none in files"
	if len(names) > 0 {
		list = strings.Join(names, ", ")
	}
	if e.XDS != nil {
		list += "; more over xDS"
	}
	return " (domains: " + list + ")"
}
