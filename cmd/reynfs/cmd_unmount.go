package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
)

func newUnmountCommand() *cobra.Command {
	var o storeOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "unmount [DIR] [--json]",
		Short: "Make everything durable, write the live tree back into DIR and unmount",
		Long: `Unmount the workspace mounted at DIR (default: the one around the current
directory). Everything is synced, the live tree is written back into the project
directory (only what changed is rewritten), and the daemon ends. A stale mount,
whose daemon died, is detached (exit 0, saying so): what the mount had acknowledged
is in the store, and the next 'reynfs mount' serves it and writes it back later.

` + exitCodeHelp,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			return runUnmount(cmd.Context(), o, dir, asJSON)
		},
	}
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was unmounted as JSON")
	return cmd
}

func runUnmount(ctx context.Context, o storeOptions, dir string, asJSON bool) error {
	store, err := findStore(o, dir)
	if err != nil {
		return err
	}
	var st api.StatusResult
	err = daemon.Call(ctx, store, api.StatusParams{}, &st, 10*time.Second)
	// A socket that takes the call but never answers is a stopped or hung
	// daemon: CleanStale asks the mount too, and aborts it if it hangs.
	if errors.Is(err, daemon.ErrNotRunning) || errors.Is(err, os.ErrDeadlineExceeded) {
		m, ok := daemon.MountOfStore(store)
		if !ok {
			return notServed(err, dir, store) // "DIR is not mounted", not "no daemon serves STORE"
		}
		what, err := daemon.CleanStale(m)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(api.MountInfo{Mountpoint: m.Point, Store: store, Cleaned: what})
		}
		fmt.Printf("cleaned the stale mount at %s: %s; the store %s keeps every acknowledged change (mount again to serve it)\n", m.Point, what, store)
		return nil
	}
	if err != nil {
		return err
	}
	var done api.UnmountResult
	if err := daemon.Call(ctx, store, api.UnmountParams{}, &done, 0); err != nil {
		if _, still := daemon.MountOfStore(store); errors.Is(err, daemon.ErrNotRunning) && !still {
			// The daemon finished and exited before its reply reached us.
			return fmt.Errorf("unmounted %s, but the daemon exited without reporting how the write-back went; see %s",
				st.Status.Mountpoint, daemon.LogPath(store))
		}
		return err
	}
	for _, w := range done.Warnings {
		fmt.Fprintln(os.Stderr, "reynfs: warning: "+oneLine(w))
	}
	if asJSON {
		return printJSON(api.MountInfo{Dir: st.Status.Dir, Mountpoint: st.Status.Mountpoint, Store: store, Head: done.Head})
	}
	fmt.Printf("unmounted %s; %s holds the live tree\n", st.Status.Mountpoint, st.Status.Dir)
	return nil
}
