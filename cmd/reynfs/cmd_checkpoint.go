package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
)

func newCheckpointCommand() *cobra.Command {
	var o storeOptions
	var label, kind, dir string
	var asJSON, waitRemote bool
	var remote string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "checkpoint [-m LABEL] [--kind turn|tool|plan-step|phase|manual]",
		Short: "Cut a generation at the current seq",
		Long: `Cut a generation of the workspace around the current directory (or --dir).
--wait-remote then waits until the remote (--remote NAME, default as 'reynfs sync')
holds it, as 'reynfs sync' does; the generation stays cut if that fails.

` + exitCodeHelp,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch kind {
			case "turn", "tool", "plan-step", "phase", "manual":
			default:
				return fmt.Errorf("%w: checkpoint --kind %q: want turn, tool, plan-step, phase or manual", errUsage, kind)
			}
			if cmd.Flags().Changed("message") && label == "" {
				return fmt.Errorf("%w: checkpoint -m '': a label must not be empty (leave -m out for none)", errUsage)
			}
			store, err := findStore(o, dir)
			if err != nil {
				return err
			}
			var resp api.CheckpointResult
			if err := callDaemon(cmd.Context(), dir, store, api.CheckpointParams{Label: label, Kind: kind}, &resp, time.Minute); err != nil {
				return err
			}
			if !waitRemote {
				if asJSON {
					return printJSON(resp)
				}
				termsafe.Println(checkpointLine(resp.Generation))
				return nil
			}
			if !asJSON {
				termsafe.Println(checkpointLine(resp.Generation))
			}
			r, err := syncRemote(cmd.Context(), syncOptions{storeOptions: o, dir: dir, timeout: timeout, asJSON: asJSON}, remote)
			if err != nil {
				return fmt.Errorf("checkpoint g%d cut, but %w", resp.Generation.ID, err)
			}
			if asJSON {
				return printJSON(api.CheckpointSyncInfo{CheckpointResult: resp, Sync: r})
			}
			termsafe.Printf("%s holds it (seq %d)\n", r.Remote, r.Shipped)
			return nil
		},
	}
	cmd.Flags().StringVarP(&label, "message", "m", "", "label of the generation")
	cmd.Flags().StringVar(&kind, "kind", "manual", "turn, tool, plan-step, phase or manual")
	cmd.Flags().StringVar(&dir, "dir", ".", "a path inside the workspace")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the generation as JSON")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	cmd.Flags().BoolVar(&waitRemote, "wait-remote", false, "then wait until the remote holds it (as 'reynfs sync')")
	cmd.Flags().StringVar(&remote, "remote", "", "the remote `NAME` of --wait-remote")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "--wait-remote gives up after `D`")
	return cmd
}

// checkpointLine is what checkpoint prints: without -m it leaves the
// label out, where it printed an empty one ("g3 at seq 5 (manual) "" root …").
func checkpointLine(g *api.Gen) string {
	label := ""
	if g.Label != "" {
		label = fmt.Sprintf(" %q", g.Label)
	}
	return fmt.Sprintf("g%d at seq %d (%s)%s root %s in %s", g.ID, g.Seq, g.Kind, label, g.Root[:12], g.Took.Round(10_000))
}
