package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
	"github.com/reynfs/reynfs/rewind/replica"
)

type forkOptions struct {
	asJSON bool
}

func newForkCommand() *cobra.Command {
	var o forkOptions
	cmd := &cobra.Command{
		Use:   "fork URL#WS[@TARGET] NEW",
		Short: "Make a new workspace on a remote that starts from another's state, copying nothing",
		Long: `Make the workspace NEW on the remote at URL a fork of its workspace WS at the state
TARGET names (any rewind target, as 'reynfs clone --at' takes it: a seq, gN, -N, a label;
by default WS's head on the remote): NEW's head names WS and that seq, and nothing is
copied (a target other than a seq is resolved against WS's records, which are read; no
file data is). A clone of NEW holds WS's history through that seq and then NEW's own; the objects are the
remote's, shared by both. NEW has no writer yet: the first 'reynfs push --ws NEW' from a
clone of it (or a 'reynfs clone --take') makes that store its writer; its pushes send
only what it adds.

` + remoteURLHelp + "\n\n" + exitCodeHelp,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runFork(cmd.Context(), o, args[0], args[1])
		},
	}
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	return cmd
}

func runFork(ctx context.Context, o forkOptions, src, name string) error {
	raw, ws, found := strings.Cut(src, "#")
	if !found || ws == "" {
		return fmt.Errorf("%w: fork URL#WS[@TARGET] NEW: the source names no workspace (#WS)", errUsage)
	}
	var target string
	if w, at, ok := strings.Cut(ws, "@"); ok {
		if at == "" {
			return fmt.Errorf("%w: fork URL#WS@TARGET NEW: empty TARGET after @", errUsage)
		}
		ws, target = w, at
	}
	for _, n := range []string{ws, name} {
		if err := replica.CheckName(n); err != nil {
			return fmt.Errorf("%w: workspace %v", errUsage, err)
		}
	}
	if ws == name {
		return fmt.Errorf("%w: fork: NEW must differ from %s", errUsage, ws)
	}
	b, err := openRemote(ctx, raw)
	if err != nil {
		return err
	}
	res, err := replica.ForkAt(ctx, b, ws, target, name) // a bad target exits 2 (rewind.ErrTarget)
	if err != nil {
		return err
	}
	if o.asJSON {
		return printJSON(res)
	}
	termsafe.Printf("forked %s#%s at seq %d as %s; 'reynfs clone %s#%s DIR' and a push from there extend it\n",
		raw, ws, res.Seq, name, raw, name)
	return nil
}
