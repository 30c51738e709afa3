package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
)

// call makes the call p for the workspace at dir and decodes its result
// into res: through its daemon when one runs, else directly on the store
// (an unmounted workspace), through the same dispatch. It never opens a
// store behind a mount whose daemon died (stale: 'reynfs unmount' cleans
// it first), nor one that lives inside a reynfs mount (it would read and
// write the store through that other workspace's daemon).
func call(ctx context.Context, o storeOptions, dir string, p api.Params, res any) error {
	store, err := findStore(o, dir)
	if err != nil {
		return err
	}
	err = daemon.Call(ctx, store, p, res, 10*time.Minute)
	if !errors.Is(err, daemon.ErrNotRunning) {
		return err
	}
	if m, ok := daemon.MountOfStore(store); ok {
		return daemon.Unanswered(m)
	}
	if m, ok := daemon.InsideMount(store); ok {
		return fmt.Errorf("%w: store %s is inside the reynfs mount %s (it overlaps that workspace): refusing to open it through that mount", errUsage, store, m.Point)
	}
	j, err := openOffline(dir, store, api.ReadOnly(p))
	if err != nil {
		return err
	}
	err = daemon.Serve(&daemon.Service{J: j}, p, res)
	if cerr := j.Close(); cerr != nil && err == nil {
		return cerr
	}
	return err
}
