package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
)

// forwarded are the signals `reynfs run` passes on to its command rather
// than acting on them itself.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH}

func newRunCommand() *cobra.Command {
	var o storeOptions
	var agent, label, onRewind, dir, jsonFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "run [--agent NAME] [--label L] [--on-rewind kill|freeze|keep] [--json] -- CMD...",
		Short: "Run a command as a tracked run of the workspace",
		Long: `Run CMD as a run of the workspace around the current directory (or --dir): the
daemon tracks all its processes (in a cgroup of its own where cgroup v2 is writable, else
in a process group) so that a rewind can cancel (kill), freeze or keep them. CMD is started
by this process, not by the daemon; signals sent to reynfs run are passed on to CMD, and
reynfs run exits with CMD's exit status (128+N for a death by signal N). A command that
cannot be started exits 127.

--json prints two JSON lines of reynfs's own, on stderr: a run.started event when CMD
has started (the run's id, pid, agent, label) and a run.exited event when it has ended
(with exit_code and state: exited, or cancelled by a rewind), the same objects the API's
subscribe stream sends. stdout stays CMD's alone, so 'reynfs run --json -- CMD | ...'
pipes exactly what CMD prints; --json-file FILE writes the lines to FILE instead of
stderr (implies --json), to keep them apart from CMD's stderr as well.

` + exitCodeHelp,
		Args:        usageArgs(cobra.MinimumNArgs(1)),
		Annotations: map[string]string{annotationCleansUp: "run"}, // waits for CMD after a signal
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := agents.ParsePolicy(onRewind); err != nil {
				return fmt.Errorf("%w: run --on-rewind %q: want kill, freeze or keep", errUsage, onRewind)
			}
			if err := findCommand(args[0]); err != nil {
				return err
			}
			store, err := findStore(o, dir)
			if err != nil {
				return err
			}
			var out *runJSON
			if asJSON || jsonFile != "" {
				if out, err = openRunJSON(jsonFile); err != nil {
					return err
				}
				defer out.close()
			}
			var st api.RunStartResult
			if err := callDaemon(cmd.Context(), dir, store, api.RunStartParams{Agent: agent, Label: label, OnRewind: onRewind}, &st, time.Minute); err != nil {
				return err
			}
			// Caught before CMD starts, so that none is lost in between.
			sigs := make(chan os.Signal, 8)
			signal.Notify(sigs, forwarded...)
			defer signal.Stop(sigs)
			c := exec.Command(args[0], args[1:]...)
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
			info := api.RunInfo{ID: st.ID, Agent: agent, Label: label, OnRewind: cmp.Or(onRewind, "kill"), Started: time.Now()}
			p, err := agents.Launch(c, st.CgroupDir)
			if err != nil {
				out.exited(store, info, exited(store, st.ID, 127), 127)
				return &codedError{msg: fmt.Sprintf("run %s: %v", st.ID, err), code: 127}
			}
			info.Pid = p.Pid
			if err := daemon.Call(context.Background(), store, api.RunAttachParams{ID: st.ID, Pid: p.Pid}, nil, time.Minute); err != nil {
				// The daemon would not track it: a rewind could not cancel it.
				_ = p.Signal(syscall.SIGKILL)
				code := p.Wait()
				out.exited(store, info, exited(store, st.ID, code), code)
				return fmt.Errorf("run %s: %w", st.ID, err)
			}
			out.started(info, st.Head)
			go func() {
				for s := range sigs {
					_ = p.Signal(s.(syscall.Signal))
				}
			}()
			code := p.Wait()
			out.exited(store, info, exited(store, st.ID, code), code)
			out.close()
			// CMD's status, passed through as it is: no error of reynfs
			// to print, and main's signal handling must not replace it.
			os.Exit(code)
			return nil
		},
	}
	cmd.Flags().SetInterspersed(false) // CMD's own flags stay CMD's
	cmd.Flags().StringVar(&agent, "agent", "", "the agent this run belongs to")
	cmd.Flags().StringVar(&label, "label", "", "a label for the run")
	cmd.Flags().StringVar(&onRewind, "on-rewind", "kill", "what a rewind does to the run: kill, freeze or keep")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON line on stderr when CMD starts and when it ends (stdout stays CMD's)")
	cmd.Flags().StringVar(&jsonFile, "json-file", "", "write the --json lines to `FILE` instead of stderr (implies --json)")
	cmd.Flags().StringVar(&dir, "dir", ".", "a path inside the workspace")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	return cmd
}

// exited tells the daemon a run's first process is gone and returns the
// head it answered at; a failure is only a notice (the run then shows as
// running until the unmount).
func exited(store, id string, code int) *api.Head {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var r api.EmptyResult
	if err := daemon.Call(ctx, store, api.RunExitedParams{ID: id, Code: code}, &r, 30*time.Second); err != nil {
		termsafe.Fprintf(os.Stderr, "reynfs: run %s: report exit: %v\n", id, err)
	}
	return r.Head
}

func newRunsCommand() *cobra.Command {
	var o storeOptions
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "runs [--json]",
		Short: "List the runs of the workspace",
		Long:  "List the runs started with 'reynfs run' in the workspace around the current directory (or --dir), oldest first, with state and exit code, and how runs are tracked.\n\n" + exitCodeHelp,
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := findStore(o, dir)
			if err != nil {
				return err
			}
			var r api.RunsResult
			if err := callDaemon(cmd.Context(), dir, store, api.RunsParams{}, &r, time.Minute); err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			termsafe.Printf("mode %s (%s)\n", r.Mode, r.ModeReason)
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSTATE\tEXIT\tPID\tON-REWIND\tAGENT\tLABEL\tSTARTED")
			for _, run := range r.Runs {
				code := "-"
				if run.State == string(agents.StateExited) || run.State == string(agents.StateCancelled) {
					code = fmt.Sprint(run.ExitCode)
				}
				termsafe.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", run.ID, run.State, code, run.Pid, run.OnRewind,
					run.Agent, run.Label, run.Started.Local().Format(time.DateTime))
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the runs as JSON")
	cmd.Flags().StringVar(&dir, "dir", ".", "a path inside the workspace")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	return cmd
}

// findCommand refuses, as a shell does (127 not found, 126 not
// executable), a CMD that cannot start, before a run is registered for
// it: 'reynfs run -- /no/such' printed Go's "launch: fork/exec /no/such:
// no such file or directory" and left an exited run behind.
func findCommand(name string) error {
	_, err := exec.LookPath(name)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return &codedError{msg: fmt.Sprintf("run: %s: command not found", name), code: 127}
	case errors.Is(err, fs.ErrPermission):
		return &codedError{msg: fmt.Sprintf("run: %s: permission denied", name), code: 126}
	}
	return &codedError{msg: fmt.Sprintf("run: %s: %v", name, errors.Unwrap(err)), code: 126}
}
