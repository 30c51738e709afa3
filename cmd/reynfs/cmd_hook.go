package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/agents/hooks"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
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
		Use:   "hook " + strings.Join(hooks.Tools, "|") + " [PAYLOAD]",
		Short: "Cut generations from an agent CLI's hook (reads the hook's JSON on stdin)",
		Long: `Run as a hook of an agent CLI: reads the hook's JSON payload on stdin (or as
the argument PAYLOAD, as Codex's notify program gets it) and cuts a generation
before each prompt (kind turn), after each tool call that can write (kind
tool) and at the end of each turn, and saves what resuming the conversation
needs as the agent's state. See docs/agents.md.

It always exits 0, even when the daemon is not running or the payload is bad
(exit 2 would block the agent): a failure is one line on stderr. stdout stays
empty except where the tool requires an answer, which is then the one that
lets the agent go on: {"continue":true} for Cursor's beforeSubmitPrompt,
{"cancel":false} for every Cline hook.`,
		Args:               cobra.ArbitraryArgs,
		FParseErrWhitelist: cobra.FParseErrWhitelist{UnknownFlags: true},
		RunE: func(cmd *cobra.Command, args []string) error {
			reply, err := runHook(cmd.Context(), o, args, os.Stdin)
			if err != nil {
				termsafe.Fprintf(os.Stderr, "reynfs: %v\n", err)
			}
			if reply != "" {
				fmt.Println(reply)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace (default: the mount around the payload's cwd)")
	return cmd
}

// runHook returns what to print on stdout (the tool's required answer, if
// any, given whatever happened) and the failure to report on stderr.
func runHook(ctx context.Context, o storeOptions, args []string, stdin io.Reader) (string, error) {
	if len(args) == 0 || len(args) > 2 {
		return "", fmt.Errorf("hook: want one tool (%s) and at most one payload argument", strings.Join(hooks.Tools, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, hookDeadline)
	defer cancel()
	var payload []byte
	if len(args) == 2 {
		payload = []byte(args[1])
	} else {
		var err error
		if payload, err = readPayload(ctx, stdin); err != nil {
			return hooks.Reply(args[0], nil), fmt.Errorf("hook %s: read payload: %w", args[0], err)
		}
	}
	calls, p, err := hooks.Translate(args[0], payload)
	reply := hooks.Reply(args[0], p)
	if err != nil || len(calls) == 0 {
		return reply, err
	}
	return reply, callAll(ctx, o, args[0], p, calls)
}

// callAll makes the calls in order against the daemon of the mount around
// the payload's cwd, all within the hook's deadline.
func callAll(ctx context.Context, o storeOptions, tool string, p *hooks.Payload, calls []api.Params) error {
	dir := p.Cwd
	if dir == "" {
		dir = "."
	}
	store, err := findStore(o, dir)
	if err != nil {
		return fmt.Errorf("hook %s: %w", tool, err)
	}
	for _, c := range calls {
		left := time.Until(deadlineOf(ctx))
		if left <= 0 {
			return fmt.Errorf("hook %s: %s: gave up after %s", tool, c.Method(), hookDeadline)
		}
		if err := daemon.Call(ctx, store, c, nil, left); err != nil {
			// Not mounted at all: say so in the user's words. A mount
			// that is there is not probed (a hung one could outlast the
			// hook's deadline).
			if _, mounted := daemon.MountOfStore(store); errors.Is(err, daemon.ErrNotRunning) && !mounted {
				err = notServed(err, dir, store)
			}
			return fmt.Errorf("hook %s %s: %w", tool, c.Method(), err)
		}
	}
	return nil
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// readPayload reads stdin up to maxPayload bytes, within ctx's deadline:
// an agent (or anyone who can start the hook) that never closes stdin, or
// sends more than maxPayload, must not hold the hook past the tool's time
// limit, which would block the agent's turn. On the deadline the reader
// goroutine is left blocked; the process exits right after.
func readPayload(ctx context.Context, stdin io.Reader) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(stdin, maxPayload+1))
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		if r.err == nil && len(r.b) > maxPayload {
			r.err = fmt.Errorf("more than %d bytes", maxPayload)
		}
		return r.b, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("stdin not closed within %s", hookDeadline)
	}
}
