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
	dir     string
	timeout time.Duration
	asJSON  bool
}

func newSyncCommand() *cobra.Command {
	var o syncOptions
	cmd := &cobra.Command{
		Use:   "sync [NAME] [--timeout D]",
		Short: "Wait until a remote holds the mounted workspace's head",
		Long: `Make the mounted workspace's writes durable, then wait until the remote NAME (default:
the continuous sync's remote, else origin, else the store's only remote) holds every
record up to that head: with 'reynfs mount --sync continuous' running to NAME, by
waiting for it; else by pushing. It fails with one line when --timeout passes, when
the remote is down (the continuous sync is backing off), or when the sync stopped
(deposed, locked by another writer).

` + exitCodeHelp,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return runSync(cmd.Context(), o, name)
		},
	}
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
