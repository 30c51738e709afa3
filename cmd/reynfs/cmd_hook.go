package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/hooks"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
)

// hookDeadline bounds everything a hook does: agent CLIs wait for their
// hooks, and a hung daemon must cost a turn two seconds, not the session.
const hookDeadline = 2 * time.Second

// maxPayload bounds what is read from stdin: the fields needed are small,
// and a tool_input holding a whole file must not cost more than a read.
const maxPayload = 8 << 20

func newHookCommand() *cobra.Command {
	var o storeOptions
	cmd := &cobra.Command{
		Use:   "hook " + strings.Join(hooks.Tools, "|"),
		Short: "Cut generations from an agent CLI's hook (reads the hook's JSON on stdin)",
		Long: `Run as a hook of an agent CLI: reads the hook's JSON payload on stdin and cuts a
generation before each prompt (kind turn), after each tool call that can write
(kind tool) and at the end of each turn, and saves what resuming the
conversation needs as the agent's state. See docs/agents.md.

It prints nothing on success and always exits 0, even when the daemon is not
running or the payload is bad (exit 2 would block the agent): a failure is
one line on stderr.`,
		Args:               cobra.ArbitraryArgs,
		FParseErrWhitelist: cobra.FParseErrWhitelist{UnknownFlags: true},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := runHook(cmd.Context(), o, args, os.Stdin); err != nil {
				fmt.Fprintf(os.Stderr, "reynfs: %v\n", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace (default: the mount around the payload's cwd)")
	return cmd
}

func runHook(ctx context.Context, o storeOptions, args []string, stdin io.Reader) error {
	if len(args) != 1 {
		return fmt.Errorf("hook: want one tool: %s", strings.Join(hooks.Tools, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, hookDeadline)
	defer cancel()
	payload, err := io.ReadAll(io.LimitReader(stdin, maxPayload))
	if err != nil {
		return fmt.Errorf("hook %s: read payload: %w", args[0], err)
	}
	calls, p, err := hooks.Translate(args[0], payload)
	if err != nil || len(calls) == 0 {
		return err
	}
	dir := p.Cwd
	if dir == "" {
		dir = "."
	}
	store, err := findStore(o, dir)
	if err != nil {
		return fmt.Errorf("hook %s: %w", args[0], err)
	}
	for _, c := range calls {
		left := time.Until(deadlineOf(ctx))
		if left <= 0 {
			return fmt.Errorf("hook %s: %s: gave up after %s", args[0], c.Method(), hookDeadline)
		}
		if err := daemon.Call(ctx, store, c, nil, left); err != nil {
			return fmt.Errorf("hook %s %s: %w", args[0], c.Method(), err)
		}
	}
	return nil
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}
