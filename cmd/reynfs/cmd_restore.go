package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
	"github.com/reynfs/reynfs/rewind"
)

func newRestoreCommand() *cobra.Command {
	var from string
	var asJSON, dry bool
	cmd := &cobra.Command{
		Use:   "restore PATH --from TARGET [--dry-run]",
		Short: "Bring one file or directory back from a past point, without a rewind",
		Long: `Restore PATH (a file, symlink or directory inside a mounted workspace) as it was at
TARGET (a seq, a generation id g3, -N or a label), replacing what is at PATH now. It is
one new journal record: the rest of the workspace and every open file stay as they are,
and 'reynfs undo' undoes it (on an unmounted store, 'reynfs rewind' to the seq
before it). The restored copy gets new inode
numbers; hard links inside a restored directory stay links. --dry-run lists what would
change below PATH (A added back, M changed, D removed) and changes nothing.

` + exitCodeHelp,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" {
				return fmt.Errorf("%w: restore needs --from TARGET", errUsage)
			}
			mount, rel, err := workspacePath(args[0])
			if err != nil {
				return err
			}
			var resp api.RestoreResult
			err = busy(!asJSON, "restoring "+rel, func() error {
				return call(cmd.Context(), storeOptions{}, mount, api.RestoreParams{Path: rel, Target: from, Dry: dry}, &resp)
			})
			if err != nil {
				return err
			}
			r := resp.Restore
			if asJSON && dry {
				return printJSON(restoreJSON{RestoreResult: r, Dry: true, Changes: resp.Changes})
			}
			if asJSON {
				return printJSON(r)
			}
			if dry {
				printRestoreDry(r, resp.Changes)
				return nil
			}
			verb := "restored"
			if r.Replaced {
				verb = "restored (replacing what was there)"
			}
			termsafe.Printf("%s %s from seq %d: %d inode(s), record seq %d, in %s\n",
				verb, r.Path, r.From, r.Inodes, r.Seq, r.Took.Round(10_000))
			// Undo of a restore needs the mount (it restores the path as
			// it was); on an unmounted store a rewind to the seq before
			// the record is the way back.
			termsafe.Printf("undo with 'reynfs undo' (unmounted: 'reynfs rewind %d')\n", r.Seq-1)
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the past point: seq, gN, -N or label")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "print what would change, change nothing")
	here := "." // completion: the workspace around the current directory
	_ = cmd.RegisterFlagCompletionFunc("from", flagTargetCompleter(&storeOptions{}, &here))
	return cmd
}

// restoreJSON is restore --dry-run --json: the restore's result (as
// without --dry-run, seq 0: no record) with the changes it would make.
type restoreJSON struct {
	*rewind.RestoreResult
	Dry     bool            `json:"dry"`
	Changes []rewind.Change `json:"changes"`
}

func printRestoreDry(r *rewind.RestoreResult, cs []rewind.Change) {
	what := ""
	if r.Replaced {
		what = " (replacing what is there)"
	}
	s := rewind.Summarize(cs)
	termsafe.Printf("would restore %s from seq %d%s: %d added back, %d changed, %d removed\n", r.Path, r.From, what, s.Added, s.Modified, s.Removed)
	for i, c := range cs {
		if i == 20 {
			termsafe.Printf("  ... and %d more\n", len(cs)-20)
			break
		}
		termsafe.Printf("  %-8s %s\n", c.Kind, c.Path)
	}
}

// workspacePath splits a path into the reynfs mount it is in and the path
// below that mount's root.
func workspacePath(p string) (mount, rel string, err error) {
	abs, err := absPath(p)
	if err != nil {
		return "", "", err
	}
	ms, _ := daemon.Mounts()
	if _, ok := storeOfMount(ms, abs); !ok {
		// Reached through a symlink from outside the workspace. (A path
		// already inside a mount is taken as written: resolving it would
		// stat through the mount, and wait on a stopped daemon.) The last
		// component may not exist now (a deleted file): resolve symlinks
		// in its directory only.
		dir, base := filepath.Split(abs)
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			abs = filepath.Join(r, base)
		}
	}
	for m := abs; ; m = filepath.Dir(m) {
		for i := len(ms) - 1; i >= 0; i-- {
			if ms[i].Point == m && ms[i].FsType == "fuse.reynfs" {
				rel, err := filepath.Rel(m, abs)
				if err != nil || rel == "." {
					return "", "", fmt.Errorf("%w: %s is the workspace root; use 'reynfs rewind' for the whole tree", errUsage, p)
				}
				return m, rel, nil
			}
		}
		if m == "/" {
			return "", "", fmt.Errorf("%w: %s is not inside a mounted reynfs workspace", errUsage, p)
		}
	}
}
