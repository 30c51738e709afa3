package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/rewind/replica"
)

func newGCCommand() *cobra.Command {
	var o storeOptions
	var dir string
	var keep int
	var dry, asJSON bool
	var remote string
	var grace time.Duration
	repack := true
	cmd := &cobra.Command{
		Use:   "gc [--keep N] [--dry-run] [--json] | gc --remote NAME [--grace D] [--repack=false] [--dry-run] [--json]",
		Short: "Collect history past the retention windows now (mounted or not)",
		Long: `Run the collector now: apply the store's retention windows (see 'reynfs retention'),
drop the records and generations below the floors, drop the objects nothing retained
names, and give the space back on disk. It prints what went and where the floors are.
Mounted, the daemon runs the same collector every few minutes and writers go on while it
runs. --keep N instead keeps the newest N generations of the current path and everything
after the oldest of them. A rewind, restore, diff or view below the floor is refused.

` + remoteGCHelp + `

` + retentionHelp + "\n\n" + exitCodeHelp,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if remote != "" || cmd.Flags().Changed("grace") || cmd.Flags().Changed("repack") {
				if cmd.Flags().Changed("keep") {
					return fmt.Errorf("%w: gc --remote takes no --keep (remote history follows 'reynfs forget --remote')", errUsage)
				}
				return runRemoteGC(cmd.Context(), o, dir, remote, grace, cmd.Flags().Changed("grace"), replica.GCOptions{DryRun: dry, NoRepack: !repack}, asJSON)
			}
			if keep < 0 || (cmd.Flags().Changed("keep") && keep < 1) {
				return fmt.Errorf("%w: gc --keep N needs N ≥ 1", errUsage)
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
			verb := "freed"
			if dry {
				verb = "would free"
			}
			fmt.Printf("%s %d objects (%s), %d records, %d generations; kept %d generations and %d objects\n",
				verb, r.Objects, human(r.ObjectBytes), r.Records, r.DroppedGens, r.Generations, r.KeptObjects)
			if r.Segments > 0 {
				fmt.Printf("rewrote %d log segments: %s freed, %s of live objects copied forward\n",
					r.Segments, human(r.SegmentBytes), human(r.MovedBytes))
			}
			if r.DiskFrom > 0 && !dry {
				fmt.Printf("store on disk: %s before, %s after\n", human(r.DiskFrom), human(r.DiskTo))
			}
			if r.Policy != "" {
				fmt.Printf("policy: %s\n", r.Policy)
			}
			printFloors(r.Floor, r.Floors)
			return nil
		},
	}
	cmd.Flags().IntVar(&keep, "keep", 0, "keep the newest N generations of the current path instead of the policy")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "print what would go, change nothing")
	cmd.Flags().StringVar(&remote, "remote", "", "collect this remote (a remote name of this store, or a URL) instead of the store")
	cmd.Flags().DurationVar(&grace, "grace", replica.DefaultGrace, "with --remote: how long a condemned pack or segment waits before a later run deletes it")
	cmd.Flags().BoolVar(&repack, "repack", true, "with --remote: copy the live objects of packs at least half dead into new packs, so the old ones can go")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&dir, "dir", ".", "the project directory (or a path inside it)")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	return cmd
}
