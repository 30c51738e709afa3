package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
)

func newLogCommand() *cobra.Command {
	var o storeOptions
	var dir string
	var all, wal, asJSON, graph bool
	var run, remote, ws string
	var exclude []string
	cmd := &cobra.Command{
		Use:   "log [--all] [--wal] [--run ID] [--graph] [--json] [--exclude GLOB] [-- PATH…]",
		Short: "Show the timeline of generations, newest first",
		Long: `Show the generations of the workspace around the current directory (or --dir):
id, seq, kind, label, time and what changed since the previous generation on its path.
--wal also lists the journal records between generations, with the process that made
each (and its run and agent, for a process started with 'reynfs run'); --run ID lists only
that run's records; --all includes inactive branches (abandoned by rewinds) and lists them.
--graph draws the forks.
The counts +added ~modified -removed are each generation's net change against the
previous one on its path. After "--", PATHs keep only the generations (and with --wal
the records) that changed them, a directory with everything below it; --exclude GLOB
(repeatable) drops paths it matches, whole or by base name ('*.log', 'node_modules').

--remote NAME|URL lists every workspace of a remote instead: head seq, epoch, lease
holder and expiry (or free), the parent of a fork, how many generations and the
newest one; with --ws WS, that workspace's generations, newest first.

` + exitCodeHelp,
		Args: usageArgs(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if remote != "" {
				for _, f := range []string{"all", "wal", "run", "graph", "exclude"} {
					if cmd.Flags().Changed(f) {
						return fmt.Errorf("%w: log --remote does not take --%s", errUsage, f)
					}
				}
				if len(args) > 0 {
					return fmt.Errorf("%w: log --remote does not take paths", errUsage)
				}
				return runLogRemote(cmd.Context(), o, dir, remote, ws, asJSON)
			}
			if ws != "" {
				return fmt.Errorf("%w: --ws goes with --remote", errUsage)
			}
			if graph {
				// The graph draws generations alone: these flags were
				// silently ignored ('log --graph --json' printed the graph).
				for _, f := range []string{"json", "wal", "run", "exclude"} {
					if cmd.Flags().Changed(f) {
						return fmt.Errorf("%w: log --graph does not take --%s (the graph shows generations only; use 'reynfs log --%s')", errUsage, f, f)
					}
				}
				if len(args) > 0 {
					return fmt.Errorf("%w: log --graph does not take paths (the graph shows generations only)", errUsage)
				}
				return printGraph(cmd.Context(), o, dir)
			}
			before, after := pathArgs(cmd, args)
			if len(before) > 0 {
				return fmt.Errorf("%w: unexpected argument %q (paths go after \"--\")", errUsage, before[0])
			}
			paths, err := workspacePaths(after)
			if err != nil {
				return err
			}
			var resp api.LogReply
			if err := call(cmd.Context(), o, dir, api.LogParams{All: all, WAL: wal, Run: run, Paths: paths, Exclude: exclude}, &resp); err != nil {
				return err
			}
			if run != "" && !mentionsRun(resp.Log, run) && !knownRun(cmd.Context(), o, dir, run) {
				return fmt.Errorf("%w: log --run %s: no such run: no record names it and the daemon has none (IDs as 'reynfs runs' lists them)", errUsage, run)
			}
			if asJSON {
				return printJSON(resp.Log)
			}
			printLog(resp.Log, all)
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "include inactive branches")
	cmd.Flags().BoolVar(&wal, "wal", false, "list the records between generations")
	cmd.Flags().BoolVar(&graph, "graph", false, "draw the forks: current @, others ○, branches indented above their fork point")
	cmd.Flags().StringVar(&run, "run", "", "list only the records of this run (implies --wal)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringArrayVar(&exclude, "exclude", nil, "leave out paths matching `GLOB` (repeatable)")
	cmd.Flags().StringVar(&dir, "dir", ".", "a path inside the workspace (or the project directory)")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	cmd.Flags().StringVar(&remote, "remote", "", "list the workspaces of the remote `NAME|URL`")
	cmd.Flags().StringVar(&ws, "ws", "", "with --remote: list this workspace's generations")
	return cmd
}

func printLog(l *daemon.LogResult, all bool) {
	termsafe.Printf("head seq %d\n", l.Head)
	for _, g := range l.Gens {
		mark := "*"
		if !g.Active {
			mark = " " // on an inactive branch
		}
		label := g.Label
		if label != "" {
			label = fmt.Sprintf("%q", label)
		}
		if g.Run != "" { // cut from inside a `reynfs run` (a hook of its agent)
			label += "  run " + g.Run
			if g.Agent != "" {
				label += " (" + g.Agent + ")"
			}
		}
		termsafe.Printf("%s g%-4d seq %-8d %-9s %s  +%d ~%d -%d  %s\n", mark, g.ID, g.Seq, g.Kind,
			g.Time.Local().Format(time.DateTime), g.Changed.Added, g.Changed.Modified, g.Changed.Removed, label)
		for _, r := range g.Records {
			who := r.Comm
			if r.Pid != 0 {
				who = fmt.Sprintf("%s[%d]", r.Comm, r.Pid)
			}
			if r.Run != "" {
				who += " run " + r.Run
				if r.Agent != "" {
					who += " (" + r.Agent + ")"
				}
			}
			termsafe.Printf("      seq %-8d %-11s %s  %s\n", r.Seq, r.Op, r.What, who)
		}
	}
	if all && len(l.Branches) > 0 {
		termsafe.Println("branches (abandoned by rewinds; 'reynfs checkout NAME' or a rewind to a seq inside one brings it back; 'reynfs branch' names them):")
		for _, b := range l.Branches {
			state := "inactive"
			if b.Active {
				state = "restored"
			}
			if b.From > b.To {
				termsafe.Printf("  reset at seq %d to seq %d: abandoned nothing\n", b.Reset, b.Target)
				continue
			}
			termsafe.Printf("  reset at seq %d to seq %d: seqs %d..%d %s\n", b.Reset, b.Target, b.From, b.To, state)
		}
	}
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// mentionsRun reports whether a generation or record of l names run.
func mentionsRun(l *daemon.LogResult, run string) bool {
	for _, g := range l.Gens {
		if g.Run == run {
			return true
		}
		for _, r := range g.Records {
			if r.Run == run {
				return true
			}
		}
	}
	return false
}

// knownRun reports whether the workspace's daemon lists run: one that
// wrote nothing yet has no record, and 'log --run' of it is no mistake.
// A typo ('--run 1', a prefix) matches neither and is refused, where it
// used to print an empty log as if the run had done nothing.
func knownRun(ctx context.Context, o storeOptions, dir, run string) bool {
	store, err := findStore(o, dir)
	if err != nil {
		return false
	}
	var r api.RunsResult
	if daemon.Call(ctx, store, api.RunsParams{}, &r, 10*time.Second) != nil {
		return false
	}
	for _, i := range r.Runs {
		if i.ID == run {
			return true
		}
	}
	return false
}
