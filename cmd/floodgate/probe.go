package main

import (
	"github.com/spf13/cobra"

	"github.com/floodgate/floodgate/client"
)

func newProbe() *cobra.Command {
	return &cobra.Command{
		Use:   "probe URL",
		Short: "Send one GET and show what the response says about its rate limits",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return client.Probe(cmd.Context(), nil, args[0], cmd.OutOrStdout())
		},
	}
}
