package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/agents/hooks"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
	"github.com/reynfs/reynfs/rewind"
)

func newRewindCommand() *cobra.Command {
	var o storeOptions
	var dir string
	var dry, asJSON, noCancel, interactive bool
	cmd := &cobra.Command{
		Use:   "rewind TARGET [--dry-run] | rewind -i",
		Short: "Move the whole workspace back to a retained point (append-only)",
		Long: `Rewind the workspace around the current directory (or --dir) to TARGET: a seq, a
generation id (g3), -N (N generations back on the current path) or a label. A reset
record is appended and synced first; nothing is deleted: the abandoned future stays
as an inactive branch ('reynfs log --all'), and rewinding to the seq just before the
reset record restores it. Handles opened before the rewind fail with ESTALE.
-i picks TARGET in the timeline UI instead ('reynfs timeline').
Runs started with 'reynfs run' are stopped first: cancelled (--on-rewind kill, the
default), frozen across the rewind (freeze) or left alone (keep), and the output names
them; --no-cancel refuses the rewind (exit 1, runs_active) while such a run is going.
On an unmounted store the store is rewound and the next mount shows the result.
A rewind to the state the workspace is already in writes nothing and says so.

` + exitCodeHelp,
		Args: usageArgs(cobra.RangeArgs(0, 1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if interactive {
				if len(args) > 0 || dry || asJSON || noCancel {
					return fmt.Errorf("%w: -i picks the target itself: give no TARGET, --dry-run, --json or --no-cancel", errUsage)
				}
				return runTimeline(cmd.Context(), o, dir)
			}
			if err := usageArgs(cobra.ExactArgs(1))(cmd, args); err != nil {
				return err
			}
			var resp api.RewindResult
			if err := call(cmd.Context(), o, dir, api.RewindParams{Target: args[0], Dry: dry, NoCancel: noCancel}, &resp); err != nil {
				return err
			}
			if asJSON {
				return printJSON(rewindJSON{Result: resp.Rewind, Already: resp.Already,
					Cancelled: resp.Cancelled, Frozen: resp.Frozen, Kept: resp.Kept})
			}
			if resp.Already {
				termsafe.Printf("already at seq %d: nothing to rewind, nothing written\n", resp.Rewind.Target)
				printResume(cmd.Context(), o, dir, resp.Rewind.Target) // the conversation may still be elsewhere
				return nil
			}
			printRewind(resp.Rewind, dry)
			printRuns("cancelled", resp.Cancelled)
			printRuns("froze and thawed", resp.Frozen)
			printRuns("kept", resp.Kept)
			if !dry {
				printResume(cmd.Context(), o, dir, resp.Rewind.Target)
			}
			return nil
		},
	}
	cmd.ValidArgsFunction = targetCompleter(&o, &dir, 1)
	cmd.Flags().BoolVar(&dry, "dry-run", false, "print what would change, change nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVarP(&interactive, "interactive", "i", false, "pick the target in the timeline UI")
	cmd.Flags().BoolVar(&noCancel, "no-cancel", false, "refuse (runs_active) rather than cancel or freeze runs still going")
	cmd.Flags().StringVar(&dir, "dir", ".", "a path inside the workspace (or the project directory)")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	return cmd
}

// rewindJSON is what rewind --json prints: the rewind's result (the API's
// RewindResult.rewind, whose fields scripts read at the top level) and the
// API result's other fields beside it.
type rewindJSON struct {
	*rewind.Result
	Already   bool          `json:"already,omitempty"`
	Cancelled []api.RunInfo `json:"cancelled,omitempty"`
	Frozen    []api.RunInfo `json:"frozen,omitempty"`
	Kept      []api.RunInfo `json:"kept,omitempty"`
}

func printRewind(r *rewind.Result, dry bool) {
	verb := "rewound"
	if dry {
		verb = "would rewind"
	}
	termsafe.Printf("%s to seq %d", verb, r.Target)
	if r.Reset != 0 {
		// undo works on an unmounted store too; the rewind N form is the
		// same move for a script that wants to name it.
		termsafe.Printf(" (reset record at seq %d; undo with 'reynfs undo', or 'reynfs rewind %d')", r.Reset, r.Reset-1)
	}
	termsafe.Printf(" in %s\n", r.Took.Round(10_000))
	if os.Getenv("REYNFS_TIMING") != "" {
		for _, p := range r.Phases {
			termsafe.Printf("  %-12s %s\n", p.Name, p.Took.Round(10_000))
		}
	}
	s := r.Summary
	termsafe.Printf("  %d restored (added back), %d changed, %d removed\n", s.Added, s.Modified, s.Removed)
	for i, c := range r.Changes {
		if i == 20 {
			termsafe.Printf("  ... and %d more\n", len(r.Changes)-20)
			break
		}
		termsafe.Printf("  %-8s %s\n", c.Kind, c.Path)
	}
	termsafe.Println("not reverted: running processes and their memory, network requests, files outside the mount")
}

// printResume says how to bring back the conversation of each agent whose
// hook saved its state by seq: the files are back, the agent's context is
// not until it is resumed. Best effort: an agent with no state says nothing.
func printResume(ctx context.Context, o storeOptions, dir string, seq uint64) {
	for _, tool := range hooks.Tools {
		var st api.AgentShowResult
		if call(ctx, o, dir, api.AgentShowParams{Name: tool, At: strconv.FormatUint(seq, 10)}, &st) != nil {
			continue
		}
		if line := hooks.Resume(st.Data); line != "" {
			termsafe.Printf("agent %s: resume its conversation with: %s\n", tool, line)
		}
	}
}

// printRuns names the runs a rewind cancelled, froze or kept.
func printRuns(what string, runs []api.RunInfo) {
	for _, r := range runs {
		termsafe.Printf("%s run %s (pid %d", what, r.ID, r.Pid)
		if r.Agent != "" {
			termsafe.Printf(", agent %s", r.Agent)
		}
		termsafe.Println(")")
	}
}
