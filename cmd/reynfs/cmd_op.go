package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
	"github.com/reynfs/reynfs/rewind"
)

func newOpCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "op",
		Short: "Workspace-level operations (op log)",
		Args:  usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(newOpLogCommand())
	return cmd
}

func newOpLogCommand() *cobra.Command {
	var o storeOptions
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "log [--json]",
		Short: "List the rewinds, checkouts, restores, undos and redos, newest first",
		Long: `List the workspace-level operations, newest first: id (the seq of its record), time,
kind, and what it moved from and to. The op log is read from the journal, so it
survives a remount and reads an unmounted store. "undone" marks the operations redo
would bring back; the first line says what undo and redo would act on.

` + undoHelp + "\n\n" + exitCodeHelp,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp api.OpLogResult
			if err := call(cmd.Context(), o, dir, api.OpLogParams{}, &resp); err != nil {
				return err
			}
			if asJSON {
				return printJSON(resp.Log)
			}
			printOpLog(resp.Log)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&dir, "dir", ".", "a path inside the workspace (or the project directory)")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	return cmd
}

func printOpLog(l *rewind.OpLog) {
	if len(l.Ops) == 0 {
		termsafe.Println("no operations yet")
		return
	}
	next := func(id uint64) string {
		if id == 0 {
			return "nothing"
		}
		return fmt.Sprint("op ", id)
	}
	termsafe.Printf("undo: %s; redo: %s\n", next(l.Undo), next(l.Redo))
	for i := len(l.Ops) - 1; i >= 0; i-- {
		op := l.Ops[i]
		to := fmt.Sprintf("seq %d", op.To)
		if op.ToGen != 0 {
			to += fmt.Sprintf(" (g%d", op.ToGen)
			if op.ToLabel != "" {
				to += fmt.Sprintf(" %q", op.ToLabel)
			}
			to += ")"
		}
		what := fmt.Sprintf("seq %d -> %s", op.From, to)
		switch op.Kind {
		case rewind.OpCheckout:
			what = fmt.Sprintf("%s: %s", op.Branch, what)
		case rewind.OpRestore:
			what = fmt.Sprintf("%s from %s", op.Path, to)
		case rewind.OpUndo, rewind.OpRedo:
			what = fmt.Sprintf("op %d: %s", op.Of, what)
			if op.Path != "" {
				what = fmt.Sprintf("op %d: %s from %s", op.Of, op.Path, to)
			}
		}
		mark := ""
		if op.Undone {
			mark = "  (undone)"
		}
		termsafe.Printf("op %-8d %s  %-8s %s%s\n", op.ID, op.Time.Local().Format("2006-01-02 15:04:05"), op.Kind, what, mark)
	}
}
