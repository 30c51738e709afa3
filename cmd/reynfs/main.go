// Command reynfs mounts a project directory as a versioned workspace.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
)

var errUsage = errors.New("usage")

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes one command line. SIGINT and SIGTERM cancel the command's
// context: client commands stop waiting for the daemon, `reynfs mount`
// stops its import and cleans up. The command then exits 130 or 143 (128
// plus the signal, as shells report it). A command other than mount that
// has not returned within signalGrace of the signal (blocked on a mount
// whose daemon is stopped, say) is left behind: the process exits anyway.
func run(args []string) int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	root := newRootCommand()
	args = relativeTargets(args, valueFlags(root))
	root.SetArgs(args)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// `reynfs run` passes every signal on to its command and waits for it;
	// any other command ends the process at a second signal.
	second := true
	returned := make(chan struct{})
	defer close(returned)
	if cmd, _, err := root.Find(args); err == nil && cmd.Annotations[annotationCleansUp] == "run" {
		second = false
	}
	go func() {
		select {
		case s := <-sigs:
			cancel(signalCause{s.(syscall.Signal)})
		case <-ctx.Done():
			return
		}
		if second {
			exitOnSecondSignal(sigs, returned)
		}
	}()
	done := make(chan error, 1)
	var ran *cobra.Command // the command that ran, once done has answered
	go func() {
		done <- guard(func() error {
			var err error
			ran, err = root.ExecuteContextC(ctx)
			return err
		})
	}()
	var err error
	finished := true // ran may be read
	select {
	case err = <-done:
	case <-ctx.Done():
		var grace <-chan time.Time
		if cmd, _, ferr := root.Find(args); ferr != nil || cmd.Annotations[annotationCleansUp] == "" {
			grace = time.After(signalGrace)
		}
		select {
		case err = <-done:
		case <-grace:
			err, finished = errors.New("gave up waiting"), false
		}
	}
	if err != nil && ctx.Err() != nil {
		err = interrupted(ctx, err)
	}
	if err != nil && finished && ran != nil && wantsJSON(ran) {
		printJSONError(os.Stderr, err)
		return exitCode(err)
	}
	if err != nil {
		// One line per line of the error (a write-back names one path a line).
		for _, line := range strings.Split(strings.TrimPrefix(err.Error(), "usage: "), "\n") {
			fmt.Fprintln(os.Stderr, "reynfs: "+termsafe.Text(strings.Join(strings.Fields(line), " ")))
		}
	}
	return exitCode(err)
}

// exitOnSecondSignal ends the process at the next signal. A command that
// cleans up after a signal can wait on something that never comes (mount,
// for a process keeping the mount busy after the lazy unmount): the second
// signal is how a person says "stop now". What that skips is what kill -9
// would skip: every acknowledged write is in the journal, and mounting the
// store again (or `reynfs unmount`) finishes the write-back.
func exitOnSecondSignal(sigs <-chan os.Signal, returned <-chan struct{}) {
	var sig syscall.Signal
	select {
	case s := <-sigs:
		sig = s.(syscall.Signal)
	case <-returned:
		return
	}
	fmt.Fprintf(os.Stderr, "reynfs: second %s: exiting now without finishing cleanup (nothing acknowledged is lost; mount again or run `reynfs unmount` to finish it)\n", signalName(sig))
	os.Exit(128 + int(sig))
}

// signalGrace is how long a command other than mount may take to return
// after SIGINT or SIGTERM.
const signalGrace = 2 * time.Second

// annotationCleansUp marks a command that must finish its own cleanup
// after a signal (mount: stop the import, remove a half-made store,
// unmount), however long that takes.
const annotationCleansUp = "reynfs/cleans-up"

// signalCause is the cause of a context cancelled by a signal.
type signalCause struct{ sig syscall.Signal }

func (s signalCause) Error() string { return "interrupted by " + signalName(s.sig) }

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// interruptedError is a command's error after a signal cancelled it; it
// exits with 128 plus the signal's number.
type interruptedError struct {
	sig syscall.Signal
	err error
}

func (e *interruptedError) Error() string {
	msg := e.err.Error()
	if strings.Contains(msg, "interrupted") {
		return msg
	}
	return "interrupted by " + signalName(e.sig) + ": " + msg
}

func (e *interruptedError) Unwrap() error { return e.err }

// interrupted marks err as the result of the signal that cancelled ctx.
func interrupted(ctx context.Context, err error) error {
	var sc signalCause
	var ie *interruptedError
	if err == nil || errors.As(err, &ie) || !errors.As(context.Cause(ctx), &sc) {
		return err
	}
	return &interruptedError{sig: sc.sig, err: err}
}

// relativeTargets lets "-N" (N generations back) be written as a target
// without "--": no flag of reynfs is a digit, so a "-N" token before "--"
// is a target, passed on in its other spelling "~N". A token that is the
// value of the flag before it (checkpoint -m -1) is left as it is: it is
// a label, and the label rule refuses it under its own spelling.
func relativeTargets(args []string, takesValue map[string]bool) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		out[i] = a
		if i > 0 && takesValue[args[i-1]] {
			continue
		}
		if len(a) > 1 && a[0] == '-' && strings.Trim(a[1:], "0123456789") == "" {
			out[i] = "~" + a[1:]
		}
	}
	return out
}

// valueFlags is every spelling ("--label", "-m") of a flag in cmd's tree
// that takes a value, so that "-m -1" is read as a flag and its value.
func valueFlags(cmd *cobra.Command) map[string]bool {
	out := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if f.NoOptDefVal != "" { // a bool, or a flag whose value is optional
					return
				}
				out["--"+f.Name] = true
				if f.Shorthand != "" {
					out["-"+f.Shorthand] = true
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd)
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
		// --version: the line 'reynfs version' prints for this binary.
		Version: strings.TrimSpace(formatBuild("reynfs", api.ThisBuild())),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newMountCommand(), newUnmountCommand(), newStatusCommand(), newCheckpointCommand(),
		newLogCommand(), newRewindCommand(), newDiffCommand(), newShowCommand(), newExportCommand(), newRestoreCommand(), newAgentCommand(), newGCCommand(), newRetentionCommand(), newFsckCommand(), newAPICommand(),
		newHookCommand(), newIntegrateCommand(), newRunCommand(), newRunsCommand(), newVersionCommand())
	root.AddCommand(newUndoCommand(), newRedoCommand(), newOpCommand(), newBranchCommand(), newCheckoutCommand())
	root.AddCommand(newTimelineCommand())
	root.AddCommand(newRemoteCommand(), newPushCommand(), newSyncCommand(), newCloneCommand(), newForkCommand(), newFetchCommand(), newForgetCommand())
	// Added now rather than by cobra at Execute, so that unknownSubcommands
	// sees it: 'reynfs completion bogus' printed the help and exited 0.
	root.InitDefaultCompletionCmd()
	unknownSubcommands(root)
	return root
}

// usageArgs wraps cobra's argument checks so they exit with exitUsage.
// A wrong count is said in the command's words, with its usage line:
// cobra's own "accepts 1 arg(s), received 0" names neither the command
// nor what was missing.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		err := check(cmd, args)
		if err == nil {
			return nil
		}
		msg := err.Error()
		if !strings.Contains(msg, "arg(s)") { // NoArgs: "unknown command X for Y" says it already
			return fmt.Errorf("%w: %s", errUsage, msg)
		}
		what := "missing argument"
		if most := countBefore(msg, " arg(s)"); len(args) > most {
			what = fmt.Sprintf("unexpected argument %q", args[most])
		}
		return fmt.Errorf("%w: %s%s (usage: %s)", errUsage, commandPrefix(cmd), what, strings.TrimSuffix(cmd.UseLine(), " [flags]"))
	}
}

// countBefore is the number just before suffix in cobra's argument-count
// message: the count, or the most, the command accepts ("accepts between
// 1 and 2 arg(s)" gives 2).
func countBefore(msg, suffix string) int {
	head, _, _ := strings.Cut(msg, suffix)
	digits := len(head)
	for digits > 0 && head[digits-1] >= '0' && head[digits-1] <= '9' {
		digits--
	}
	n, _ := strconv.Atoi(head[digits:])
	return n
}

// commandPrefix is "agent save: " for a subcommand's error, so that a
// message names the command it is about, as every other error does.
func commandPrefix(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return ""
	}
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ") + ": "
}
