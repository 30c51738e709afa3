package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
)

type syncOptions struct {
	storeOptions
	dir                string
	timeout            time.Duration
	asJSON             bool
	continuous, manual bool
	ws                 string
}

func newSyncCommand() *cobra.Command {
	var o syncOptions
	cmd := &cobra.Command{
		Use:   "sync [NAME] [--timeout D] [--continuous [--ws WS] | --manual]",
		Short: "Wait until a remote holds the mounted workspace's head",
		Long: `Make the mounted workspace's writes durable, then wait until the remote NAME (default:
the continuous sync's remote, else origin, else the store's only remote) holds every
record up to that head: with 'reynfs mount --sync continuous' running to NAME, by
waiting for it; else by pushing. It fails with one line when --timeout passes, when
the remote is down (the continuous sync is backing off), or when the sync stopped
(deposed, locked by another writer).

--continuous [NAME] turns the continuous sync on without remounting (to NAME, picked as
above; --ws names the workspace in the remote, default the project directory's base
name), --manual turns it off (what is durable is shipped first, within the mount's
--sync-drain, and the lease released); the store remembers either, as it remembers
'reynfs mount --sync'.

` + exitCodeHelp,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			if o.continuous || o.manual {
				return runSyncMode(cmd.Context(), o, name)
			}
			if o.ws != "" {
				return fmt.Errorf("%w: --ws goes with --continuous", errUsage)
			}
			return runSync(cmd.Context(), o, name)
		},
	}
	cmd.Flags().BoolVar(&o.continuous, "continuous", false, "turn the continuous sync on (no remount)")
	cmd.Flags().BoolVar(&o.manual, "manual", false, "turn the continuous sync off (no remount)")
	cmd.Flags().StringVar(&o.ws, "ws", "", "with --continuous: the workspace's name in the remote")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after `D`")
	cmd.Flags().StringVar(&o.dir, "dir", ".", "a path inside the workspace")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	return cmd
}

func runSync(ctx context.Context, o syncOptions, name string) error {
	r, err := syncRemote(ctx, o, name)
	if err != nil {
		return err
	}
	if o.asJSON {
		return printJSON(r)
	}
	termsafe.Printf("%s (%s#%s) holds seq %d (waited for %d, %s)\n", r.Remote, r.URL, r.WS, r.Shipped, r.Seq, r.Took.Round(time.Millisecond))
	return nil
}

// syncRemote calls sync on the workspace's daemon.
func syncRemote(ctx context.Context, o syncOptions, name string) (*api.SyncResult, error) {
	if o.timeout <= 0 {
		return nil, fmt.Errorf("%w: --timeout %s: want a positive duration", errUsage, o.timeout)
	}
	store, err := findStore(o.storeOptions, o.dir)
	if err != nil {
		return nil, err
	}
	var resp api.SyncResult
	err = busy(!o.asJSON, "syncing", func() error {
		return callDaemon(ctx, o.dir, store, api.SyncParams{Remote: name, Timeout: o.timeout}, &resp, o.timeout+30*time.Second)
	})
	if err != nil {
		return nil, err
	}
	return &resp, nil
}

// runSyncMode is sync --continuous / --manual.
func runSyncMode(ctx context.Context, o syncOptions, name string) error {
	p := api.SyncModeParams{Mode: "continuous", Remote: name, WS: o.ws}
	switch {
	case o.continuous && o.manual:
		return fmt.Errorf("%w: --continuous and --manual: choose one", errUsage)
	case o.manual && (name != "" || o.ws != ""):
		return fmt.Errorf("%w: sync --manual takes no NAME or --ws (it turns the continuous sync off)", errUsage)
	case o.manual:
		p = api.SyncModeParams{Mode: "manual"}
	}
	store, err := findStore(o.storeOptions, o.dir)
	if err != nil {
		return err
	}
	var r api.SyncModeResult
	if err := callDaemon(ctx, o.dir, store, p, &r, 2*time.Minute); err != nil {
		return err
	}
	if r.State == "stopped" {
		return fmt.Errorf("continuous sync to %s (%s#%s) stopped at once: %s ('reynfs status' shows it; 'reynfs sync --manual' turns it off)", r.Remote, r.URL, r.WS, r.Reason)
	}
	if o.asJSON {
		return printJSON(r)
	}
	switch {
	case r.Mode == "manual" && !r.Changed:
		termsafe.Printf("no continuous sync was running\n")
	case r.Mode == "manual":
		termsafe.Printf("continuous sync to %s#%s stopped (the lease released)\n", r.Remote, r.WS)
	case !r.Changed:
		termsafe.Printf("continuous sync to %s (%s#%s) is running already\n", r.Remote, r.URL, r.WS)
	default:
		termsafe.Printf("continuous sync to %s (%s#%s) started (%s); 'reynfs status' shows its lag\n", r.Remote, r.URL, r.WS, r.State)
	}
	if r.Warning != "" {
		termsafe.Printf("warning: %s\n", r.Warning)
	}
	return nil
}
