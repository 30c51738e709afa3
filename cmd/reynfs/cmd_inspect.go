package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
)

func newDiffCommand() *cobra.Command {
	var o storeOptions
	var dir string
	var asJSON, patch bool
	var exclude []string
	cmd := &cobra.Command{
		Use:   "diff A [B] [-p] [--exclude GLOB] [-- PATH…]",
		Short: "List what changed between two retained points (B defaults to the live tree)",
		Long: `A and B are seqs, generation ids (g3), -N or labels; B defaults to the live tree.
After "--", PATHs keep only the changes to them (a directory with everything below it);
--exclude GLOB (repeatable) drops paths it matches, whole or by base name.

` + exitCodeHelp,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			targets, after := pathArgs(cmd, args)
			if len(targets) < 1 || len(targets) > 2 {
				return fmt.Errorf("%w: diff takes A [B] before \"--\" (got %d)", errUsage, len(targets))
			}
			paths, err := workspacePaths(after)
			if err != nil {
				return err
			}
			p := api.DiffParams{Target: targets[0], Patch: patch, Paths: paths, Exclude: exclude}
			if len(targets) == 2 {
				p.Other = targets[1]
			}
			var resp api.DiffResult
			if err := call(cmd.Context(), o, dir, p, &resp); err != nil {
				return err
			}
			if asJSON {
				return printJSON(resp.Changes)
			}
			if patch {
				fmt.Print(resp.Patch)
				return nil
			}
			for _, c := range resp.Changes {
				termsafe.Printf("%c\t%s\n", map[string]byte{"added": 'A', "modified": 'M', "removed": 'D'}[c.Kind], c.Path)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.ValidArgsFunction = targetCompleter(&o, &dir, 2)
	cmd.Flags().BoolVarP(&patch, "patch", "p", false, "print a unified diff of the changed files")
	cmd.Flags().StringArrayVar(&exclude, "exclude", nil, "leave out paths matching `GLOB` (repeatable)")
	cmd.Flags().StringVar(&dir, "dir", ".", "a path inside the workspace (or the project directory)")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	return cmd
}

func newShowCommand() *cobra.Command {
	var o storeOptions
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show X",
		Short: "Describe one generation or record",
		Long:  "X is a seq, a generation id (g3), -N or a label.\n\n" + exitCodeHelp,
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp api.ShowResult
			if err := call(cmd.Context(), o, dir, api.ShowParams{Target: args[0]}, &resp); err != nil {
				return err
			}
			if asJSON {
				resp.Head = nil // the record and generation, as before the API had heads
				return printJSON(resp)
			}
			r := resp.Record
			termsafe.Printf("seq %d  %s  %s  %s[%d]\n  %s\n", r.Seq, r.Time.Local().Format("2006-01-02 15:04:05.000"), r.Op, r.Comm, r.Pid, r.What)
			if g := resp.Gen; g != nil {
				termsafe.Printf("generation g%d (%s) %q root %s\n  since seq %d: +%d added, ~%d modified, -%d removed; on the current path: %v\n",
					g.ID, g.Kind, g.Label, g.Root[:12], g.Parent, g.Changed.Added, g.Changed.Modified, g.Changed.Removed, g.Active)
			}
			return nil
		},
	}
	cmd.ValidArgsFunction = targetCompleter(&o, &dir, 1)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&dir, "dir", ".", "a path inside the workspace (or the project directory)")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	return cmd
}

func newExportCommand() *cobra.Command {
	var o storeOptions
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "export X DIR",
		Short: "Materialize a retained point as an ordinary directory",
		Long:  "X is a seq, a generation id (g3), -N, a label or 'live'. DIR must be empty or missing.\n\n" + exitCodeHelp,
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			dest, err := absPath(args[1])
			if err != nil {
				return err
			}
			var resp api.SeqResult
			err = busy(!asJSON, "exporting "+args[0], func() error {
				return call(cmd.Context(), o, dir, api.ExportParams{Target: args[0], Dir: dest}, &resp)
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(api.ExportInfo{SeqResult: resp, Dir: dest})
			}
			termsafe.Printf("exported seq %d to %s\n", resp.Seq, dest)
			return nil
		},
	}
	cmd.ValidArgsFunction = targetCompleter(&o, &dir, 1)
	cmd.Flags().StringVar(&dir, "dir", ".", "a path inside the workspace (or the project directory)")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
