// Command reynfs mounts a project directory as a versioned workspace.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root := newRootCommand()
	root.SetArgs(relativeTargets(os.Args[1:]))
	err := guard(func() error { return root.ExecuteContext(ctx) })
	stop()
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "usage: ")
		fmt.Fprintln(os.Stderr, "reynfs: "+strings.Join(strings.Fields(msg), " "))
	}
	os.Exit(exitCode(err))
}

// relativeTargets lets "-N" (N generations back) be written as a target
// without "--": no flag of reynfs is a digit, so a "-N" token before "--"
// is a target, passed on in its other spelling "~N".
func relativeTargets(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		out[i] = a
		if len(a) > 1 && a[0] == '-' && strings.Trim(a[1:], "0123456789") == "" {
			out[i] = "~" + a[1:]
		}
	}
	return out
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "reynfs",
		Short: "A versioned workspace file system for AI coding agents",
		Long: `reynfs mounts a project directory as a versioned workspace: every change is a
journal record with a global sequence number and all content is stored once, by hash.

` + exitCodeHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return fmt.Errorf("%w: %v", errUsage, err)
	})
	root.AddCommand(newMountCommand(), newUnmountCommand(), newStatusCommand(), newCheckpointCommand(),
		newLogCommand(), newRewindCommand(), newDiffCommand(), newShowCommand(), newExportCommand(), newRestoreCommand(), newAgentCommand(), newGCCommand(), newFsckCommand())
	return root
}

// usageArgs wraps cobra's argument checks so they exit with exitUsage.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		return nil
	}
}
