package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
	"github.com/reynfs/reynfs/rewind"
)

const branchHelp = `Every abandoned segment (what a rewind left behind) is a branch, named b-TIP after
the seq of its tip: the name never changes while it is a branch. A name given with
'reynfs branch NAME [TARGET]' marks one state, as a tag does (TARGET as for rewind;
default the current state); it is stored once and never changed, and must not read
as a target (a number, gN, -N, ~N, @..., b-N) nor duplicate a label or branch name.`

func newBranchCommand() *cobra.Command {
	var o storeOptions
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "branch [NAME [TARGET]] [--json]",
		Short: "List the branches, or name one",
		Long: `Without arguments, list the abandoned branches, newest first: name, tip seq and
generation, the fork point (where it meets the current path), age, and what its tip
changes against the fork point (+added ~modified -removed); then the given names.

` + branchHelp + "\n\n" + exitCodeHelp,
		Args: usageArgs(cobra.MaximumNArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				p := api.BranchNameParams{Name: args[0]}
				if len(args) == 2 {
					p.Target = args[1]
				}
				var resp api.BranchNameResult
				if err := call(cmd.Context(), o, dir, p, &resp); err != nil {
					return err
				}
				if asJSON {
					return printJSON(resp.Name)
				}
				termsafe.Printf("named seq %d %s\n", resp.Name.Seq, resp.Name.Name)
				return nil
			}
			var resp api.BranchListResult
			if err := call(cmd.Context(), o, dir, api.BranchListParams{}, &resp); err != nil {
				return err
			}
			if asJSON {
				return printJSON(resp.Branches)
			}
			printBranches(resp.Branches, time.Now())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&dir, "dir", ".", "a path inside the workspace (or the project directory)")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	return cmd
}

func printBranches(bs []rewind.Branch, now time.Time) {
	if len(bs) == 0 {
		termsafe.Println("no branches (a rewind leaves one behind)")
		return
	}
	for _, b := range bs {
		name := b.Name
		if len(b.Names) > 0 {
			name += " (" + strings.Join(b.Names, ", ") + ")"
		}
		tip := fmt.Sprintf("seq %d", b.Tip)
		if b.Gen != 0 {
			tip += fmt.Sprintf(" g%d", b.Gen)
		}
		where := fmt.Sprintf("fork seq %d", b.Fork)
		if b.Current {
			where = "on the current path"
		}
		c := b.Changed
		termsafe.Printf("%-20s tip %-14s %-16s %8s ago  +%d ~%d -%d\n", name, tip, where,
			now.Sub(b.Time).Round(time.Second), c.Added, c.Modified, c.Removed)
	}
}

func newCheckoutCommand() *cobra.Command {
	var o storeOptions
	var dir string
	var dry, asJSON, noCancel bool
	cmd := &cobra.Command{
		Use:   "checkout NAME [--dry-run]",
		Short: "Move the workspace to a branch's tip (a rewind; undo with 'reynfs undo')",
		Long: `Move the workspace to the tip of branch NAME (b-TIP or a given name): a rewind
underneath, recorded as a checkout operation ('reynfs op log'), so 'reynfs undo'
goes back. Runs are stopped as for rewind.

` + branchHelp + "\n\n" + exitCodeHelp,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp api.RewindResult
			if err := call(cmd.Context(), o, dir, api.CheckoutParams{Name: args[0], Dry: dry, NoCancel: noCancel}, &resp); err != nil {
				return err
			}
			if asJSON {
				return printJSON(resp.Rewind)
			}
			termsafe.Printf("checkout %s: ", args[0])
			printRewind(resp.Rewind, dry)
			printRuns("cancelled", resp.Cancelled)
			printRuns("froze and thawed", resp.Frozen)
			printRuns("kept", resp.Kept)
			return nil
		},
	}
	cmd.Flags().BoolVar(&dry, "dry-run", false, "print what would change, change nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&noCancel, "no-cancel", false, "refuse (runs_active) rather than cancel or freeze runs still going")
	cmd.Flags().StringVar(&dir, "dir", ".", "a path inside the workspace (or the project directory)")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	return cmd
}
