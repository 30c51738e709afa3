package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
)

// newAPICommand is 'reynfs api': facts about the control API for the
// programs that speak it (docs/api.md).
func newAPICommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "api",
		Short: "The control API other programs speak (see docs/api.md)",
		Args:  usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "schema",
		Short: "Print the JSON schema of the control API's requests, replies and events",
		Long:  "Print the JSON schema of the control API (version " + api.Version + "), generated from its Go types; docs/api.schema.json is the same text.\n\n" + exitCodeHelp,
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := api.Schema()
			if err != nil {
				return err
			}
			_, err = os.Stdout.Write(b)
			return err
		},
	})
	return cmd
}
