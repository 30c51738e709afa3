package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
)

func newAgentCommand() *cobra.Command {
	var o storeOptions
	var dir string
	cmd := &cobra.Command{
		Use:   "agent save|show|list",
		Short: "Save and read agents' runtime state, versioned with the tree",
		Long: `An agent saves its runtime state (a plan, a conversation cursor: whatever it needs to
resume) as one journal record. Each generation holds every agent's latest state with the
tree, and a rewind brings both back together: after 'reynfs rewind X', 'reynfs agent show
NAME' prints the state NAME had saved at X.

` + exitCodeHelp,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", ".", "a path inside the workspace (or the project directory)")
	cmd.PersistentFlags().StringVar(&o.store, "store", "", "store folder of the workspace")
	var asJSON bool
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON (show: the state base64 in \"data\")")

	save := &cobra.Command{
		Use:   "save NAME [FILE]",
		Short: "Save NAME's state from FILE (or standard input)",
		Args:  usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := agents.CheckName(args[0]); err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			var data []byte
			var err error
			if len(args) == 2 && args[1] != "-" {
				data, err = os.ReadFile(args[1])
			} else {
				data, err = io.ReadAll(io.LimitReader(os.Stdin, agents.MaxState+1))
			}
			if err != nil { // "agent save: read FILE: …", not a bare "open FILE: …"
				if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
					return fmt.Errorf("%w: agent save: read %s: %v", errUsage, pe.Path, pe.Err)
				}
				return fmt.Errorf("%w: agent save: %v", errUsage, err)
			}
			var resp api.SeqResult
			if err := call(cmd.Context(), o, dir, api.AgentSaveParams{Name: args[0], Data: data}, &resp); err != nil {
				return err
			}
			if asJSON {
				return printJSON(resp)
			}
			termsafe.Printf("saved %s (%d bytes) at seq %d\n", args[0], len(data), resp.Seq)
			return nil
		},
	}
	var at string
	show := &cobra.Command{
		Use:   "show NAME [--at TARGET]",
		Short: "Print NAME's saved state (now, or at a past point)",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp api.AgentShowResult
			if err := call(cmd.Context(), o, dir, api.AgentShowParams{Name: args[0], At: at}, &resp); err != nil {
				return err
			}
			if asJSON {
				return printJSON(resp)
			}
			_, err := os.Stdout.Write(resp.Data)
			return err
		},
	}
	show.Flags().StringVar(&at, "at", "", "a past point: seq, gN, -N or label")
	_ = show.RegisterFlagCompletionFunc("at", flagTargetCompleter(&o, &dir))
	var listAt string
	list := &cobra.Command{
		Use:   "list [--at TARGET]",
		Short: "List the agents with a saved state",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp api.AgentListResult
			if err := call(cmd.Context(), o, dir, api.AgentListParams{At: listAt}, &resp); err != nil {
				return err
			}
			if asJSON {
				return printJSON(resp.Agents)
			}
			for _, a := range resp.Agents {
				termsafe.Printf("%-24s %s\n", a.Name, a.State.Short())
			}
			return nil
		},
	}
	list.Flags().StringVar(&listAt, "at", "", "a past point: seq, gN, -N or label")
	_ = list.RegisterFlagCompletionFunc("at", flagTargetCompleter(&o, &dir))
	cmd.AddCommand(save, show, list)
	return cmd
}
