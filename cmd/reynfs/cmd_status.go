package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
)

func newStatusCommand() *cobra.Command {
	var o storeOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [DIR]",
		Short: "Show the mount, store, head seq, records, objects and store size",
		Long: `Show the state of the workspace mounted at DIR (default: around the current directory).
Unmounted, it describes the store and exits 5. A mount whose daemon died (killed,
crashed) is reported as "daemon dead, mount stale" with exit 6: 'reynfs unmount'
cleans it, and the next mount recovers every acknowledged change from the store.

` + exitCodeHelp,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			return runStatus(cmd.Context(), o, dir, asJSON)
		},
	}
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func runStatus(ctx context.Context, o storeOptions, dir string, asJSON bool) error {
	store, err := findStore(o, dir)
	if err != nil {
		return err
	}
	var resp api.StatusResult
	err = daemon.Call(ctx, store, api.StatusParams{}, &resp, 30*time.Second)
	if errors.Is(err, daemon.ErrNotRunning) {
		if m, ok := daemon.MountOfStore(store); ok {
			return daemon.Unanswered(m) // the store stays closed: the next mount recovers it
		}
		// Not mounted: describe the store, and still exit 5 (no daemon).
		if serr := call(ctx, storeOptions{store: store}, dir, api.StoreStatusParams{Store: store}, &resp); serr == nil {
			printStatusRemotes(ctx, resp.Status, dir, store, asJSON)
		} else if exitCode(serr) == exitStore {
			return serr // a damaged store says so, not "not running"
		}
		return notServed(err, dir, store)
	}
	if err != nil {
		return err
	}
	printStatus(resp.Status, asJSON)
	return nil
}

// printStatusRemotes is printStatus for an unmounted store, with a line
// per workspace of each remote: the seq shipped and the records behind
// (cmd_remoteread.go). A mounted store's daemon does not report them yet.
func printStatusRemotes(ctx context.Context, s *api.Status, dir, store string, asJSON bool) {
	var lags []remoteLag
	if j, err := openOffline(dir, store, true); err == nil {
		lags, err = remoteLags(ctx, j)
		_ = j.Close()
		if err != nil {
			lags = []remoteLag{{Error: oneLine(err.Error())}}
		}
	}
	if asJSON {
		_ = printJSON(struct {
			*api.Status
			Remotes []remoteLag `json:"remotes,omitempty"`
		}{s, lags})
		return
	}
	printStatus(s, false)
	printRemoteLags(lags)
}

func printStatus(s *api.Status, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s)
		return
	}
	if s.Mounted {
		termsafe.Printf("mount:    %s (project %s, daemon pid %d, up %s)\n", s.Mountpoint, s.Dir, s.Pid, s.Uptime)
	} else {
		termsafe.Printf("mount:    not mounted (project %s)\n", s.Dir)
	}
	termsafe.Printf("store:    %s\n", s.Store)
	if s.PrivateHistory {
		termsafe.Printf("views:    %s/ (read-only history in the mount root; private: the owner and root only)\n", s.ViewsName)
	} else {
		termsafe.Printf("views:    %s/ (read-only history in the mount root)\n", s.ViewsName)
	}
	termsafe.Printf("head seq: %d\n", s.HeadSeq)
	termsafe.Printf("records:  %d\n", s.Records)
	termsafe.Printf("objects:  %d (%s)\n", s.Objects, human(s.ObjectBytes))
	termsafe.Printf("size:     %s on disk\n", human(s.StoreBytes))
	if l := s.Lazy; l != nil && l.Complete {
		termsafe.Printf("lazy:     every object fetched from %s; the store is whole (on demand %d in %d requests, by prefetch %d in %d requests)\n",
			l.Remote, l.DemandObjects, l.DemandRequests, l.PrefetchObjects, l.PrefetchRequests)
	} else if l != nil {
		state := "not prefetching"
		if l.Prefetching {
			state = "prefetching"
		}
		termsafe.Printf("lazy:     %d objects (%s) still on %s, %s; fetched on demand %d (%s, %d requests), by prefetch %d (%s, %d requests)\n",
			l.RemoteObjects, human(l.RemoteBytes), l.Remote, state, l.DemandObjects, human(l.DemandBytes), l.DemandRequests,
			l.PrefetchObjects, human(l.PrefetchBytes), l.PrefetchRequests)
	}
	if s.Mounted {
		termsafe.Printf("inodes:   %d, %s buffered\n", s.Inodes, human(int64(s.Buffered)))
		termsafe.Printf("runs:     %s (%s)\n", s.RunMode, s.RunModeReason)
	}
	for _, r := range s.Remotes {
		termsafe.Println(remoteSyncLine(r))
	}
	if f := s.Follow; f != nil {
		termsafe.Println(followLine(f))
	}
}

// followLine is status's line for a follower mount (mount --follow).
func followLine(f *api.FollowStatus) string {
	src := f.Source
	if full := f.URL + "#" + f.WS; full != src {
		src += " (" + full + ")"
	}
	if f.State == "not mounted" {
		return fmt.Sprintf("follows:  %s, read-only; holds seq %d; 'reynfs mount' follows it", src, f.LocalSeq)
	}
	line := fmt.Sprintf("follows:  %s, read-only, %s: local seq %d, remote HEAD seq %d, lag %d records (%.1f s)",
		src, f.State, f.LocalSeq, f.RemoteSeq, f.LagRecords, f.LagSeconds)
	if f.LastError != "" {
		line += "; last error: " + oneLine(f.LastError)
	}
	if f.Reason != "" {
		line += "; stopped: " + oneLine(f.Reason)
	}
	return line
}

// remoteSyncLine is status's line for one remote of a mounted store.
func remoteSyncLine(r api.RemoteSync) string {
	line := fmt.Sprintf("remote:   %s#%s (%s) %s", r.Name, r.WS, r.URL, r.Mode)
	if r.State != "" {
		line += ", " + r.State
	}
	line += fmt.Sprintf(": shipped seq %d of %d, lag %d records", r.Shipped, r.Durable, r.LagRecords)
	if r.Mode == "continuous" {
		line += fmt.Sprintf(" (%.1f s, %s pending)", r.LagSeconds, human(r.PendingBytes))
	}
	if r.HoldsFloor {
		line += fmt.Sprintf("; retention keeps seqs from %d for it", r.FloorSeq)
	}
	if r.LastError != "" {
		line += "; last error: " + oneLine(r.LastError)
	}
	if r.Reason != "" {
		line += "; stopped: " + oneLine(r.Reason)
	}
	return line
}

func human(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}
