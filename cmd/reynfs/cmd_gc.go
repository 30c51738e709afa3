package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
)

func newGCCommand() *cobra.Command {
	var o storeOptions
	var dir string
	var keep int
	var dry, asJSON bool
	cmd := &cobra.Command{
		Use:   "gc --keep N [--dry-run]",
		Short: "Drop history older than the newest N generations (unmounted stores)",
		Long: `Keep the newest N generations of the current path and everything after the oldest
of them (later records, branches that fork after it); drop older records and generations,
and the objects nothing retained names. Rewinds to dropped points are refused afterwards
("older than what the store retains"). Runs on an unmounted store.

` + exitCodeHelp,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keep < 1 {
				return fmt.Errorf("%w: gc needs --keep N with N ≥ 1", errUsage)
			}
			var resp api.GCResult
			err := busy(!asJSON, "collecting", func() error {
				return call(cmd.Context(), o, dir, api.GCParams{Keep: keep, Dry: dry}, &resp)
			})
			if err != nil {
				return err
			}
			r := resp.GC
			if asJSON {
				return printJSON(r)
			}
			verb := "dropped"
			if dry {
				verb = "would drop"
			}
			fmt.Printf("retained from seq %d (was %d): %d generations kept\n", r.Floor, r.AlreadyFloor, r.Generations)
			fmt.Printf("%s %d generations, %d records, %d objects (%s); %d objects kept\n",
				verb, r.DroppedGens, r.Records, r.Objects, human(r.ObjectBytes), r.KeptObjects)
			return nil
		},
	}
	cmd.Flags().IntVar(&keep, "keep", 0, "generations of the current path to keep")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "print what would be dropped, drop nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&dir, "dir", ".", "the project directory (or a path inside it)")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	return cmd
}
