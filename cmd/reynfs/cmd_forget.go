package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
	"github.com/reynfs/reynfs/rewind/replica"
)

type forgetOptions struct {
	remoteOptions
	remote, ws string
}

func newForgetCommand() *cobra.Command {
	var o forgetOptions
	cmd := &cobra.Command{
		Use:   "forget --remote NAME [--ws WS] TARGET",
		Short: "Make a remote keep a workspace's history only from a generation on",
		Long: `Raise the floor of workspace WS on the remote NAME (a remote name of this store, or a
URL) to the generation TARGET names (gN, or the seq of a generation): a clone from then on
holds the history from that generation, and gN still names the same generation in it.
Nothing is deleted here: 'reynfs gc --remote NAME' condemns what no workspace reaches any
more and deletes it in a later run, after a grace period. A fork of WS keeps what it needs
of WS's history. Refused while a writer holds the workspace's lease (a push running),
except the continuous sync of this mounted workspace: it forgets under its own lease,
between two ships, and goes on syncing.
WS is by default the project directory's base name.

` + exitCodeHelp,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runForget(cmd.Context(), o, args[0])
		},
	}
	o.addFlags(cmd)
	cmd.Flags().StringVar(&o.remote, "remote", "", "the remote: a name of this store's remotes, or a URL")
	cmd.Flags().StringVar(&o.ws, "ws", "", "the workspace's name in the remote (default: the project directory's base name)")
	return cmd
}

func runForget(ctx context.Context, o forgetOptions, target string) error {
	if o.remote == "" {
		return fmt.Errorf("%w: forget needs --remote NAME (local history follows 'reynfs retention')", errUsage)
	}
	ws, err := remoteWorkspace(o.dir, o.ws)
	if err != nil {
		return err
	}
	res, err := forgetThroughSync(ctx, o, ws, target)
	if res == nil && err == nil {
		var b objstore.Backend
		if b, err = resolveRemote(ctx, o.storeOptions, o.dir, o.remote, "forget --remote"); err != nil {
			return err
		}
		res, err = replica.Forget(ctx, b, ws, target)
	}
	if errors.Is(err, replica.ErrTarget) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err != nil {
		return err
	}
	if o.asJSON {
		return printJSON(res)
	}
	if !res.Changed {
		termsafe.Printf("%s#%s keeps history from seq %d already (g%d is at seq %d)\n", res.Remote, res.WS, res.From, res.ID, res.Seq)
		return nil
	}
	termsafe.Printf("%s#%s keeps history from g%d (seq %d): %d generations forgotten, floor %d (was %d); 'reynfs gc --remote' frees the space\n",
		res.Remote, res.WS, res.ID, res.Seq, res.Generations, res.Floor, res.OldFloor)
	return nil
}

// forgetThroughSync forgets through the daemon's continuous sync when it
// ships ws to the remote o names (by name, or by its URL); res and err
// are nil when none does (the caller forgets as unmounted).
func forgetThroughSync(ctx context.Context, o forgetOptions, ws, target string) (*replica.ForgetResult, error) {
	store, err := findStore(o.storeOptions, o.dir)
	if err != nil {
		return nil, err
	}
	var rs api.RemoteListResult
	if err := daemon.Call(ctx, store, api.RemoteListParams{}, &rs, 10*time.Second); err != nil {
		return nil, nil // not mounted (or no answer): as unmounted
	}
	for _, r := range rs.Remotes {
		if r.Sync == "" || r.WS != ws || r.Name != o.remote && r.URL != o.remote {
			continue
		}
		var res api.ForgetResult
		if err := daemon.Call(ctx, store, api.ForgetParams{Remote: r.Name, WS: ws, Target: target}, &res, 10*time.Minute); err != nil {
			return nil, err
		}
		f := res.Forget
		return &replica.ForgetResult{Remote: f.Remote, WS: f.WS, ID: f.ID, Seq: f.Seq, From: f.From, OldFloor: f.OldFloor,
			Floor: f.Floor, Generations: f.Generations, Dropped: f.Dropped, Changed: f.Changed}, nil
	}
	return nil, nil
}
