package main

import (
	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
)

const undoHelp = `An operation is a rewind, a checkout or a restore ('reynfs op log' lists them).
Undo reverts the newest one not undone yet: a rewind or checkout by a rewind to the
seq just before its reset record (the abandoned future comes back), a restore by
restoring the path as it was before. Repeated undo walks further back; undo of an
undo is not a redo. Redo moves forward again over the newest undone operation; a new
rewind, checkout or restore ends what can be redone. Undo and redo only append: each
is an operation in the op log, and nothing is deleted. Changes made since the
operation go with the undo (they stay reachable, and redo brings them back).`

func newUndoCommand() *cobra.Command { return undoCommand(false) }
func newRedoCommand() *cobra.Command { return undoCommand(true) }

func undoCommand(redo bool) *cobra.Command {
	var o storeOptions
	var dir string
	var asJSON, noCancel bool
	verb, short := "undo", "Revert the last rewind, checkout or restore (append-only)"
	if redo {
		verb, short = "redo", "Move forward again over the last undone operation"
	}
	cmd := &cobra.Command{
		Use:   verb + " [--json]",
		Short: short,
		Long:  undoHelp + "\n\n" + exitCodeHelp,
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p api.Params = api.UndoParams{NoCancel: noCancel}
			if redo {
				p = api.RedoParams{NoCancel: noCancel}
			}
			var resp api.UndoResult
			if err := call(cmd.Context(), o, dir, p, &resp); err != nil {
				return err
			}
			if asJSON {
				return printJSON(&resp)
			}
			m := resp.Move
			termsafe.Printf("%s of %s %d: ", m.Kind, m.OfKind, m.Of)
			if resp.Restore != nil {
				termsafe.Printf("restored %s from seq %d (record %d)\n", resp.Restore.Path, resp.Restore.From, resp.Restore.Seq)
				return nil
			}
			printRewind(resp.Rewind, false)
			printRuns("cancelled", resp.Cancelled)
			printRuns("froze and thawed", resp.Frozen)
			printRuns("kept", resp.Kept)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&noCancel, "no-cancel", false, "refuse (runs_active) rather than cancel or freeze runs still going")
	cmd.Flags().StringVar(&dir, "dir", ".", "a path inside the workspace (or the project directory)")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	return cmd
}
