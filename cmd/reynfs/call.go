package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
)

// call answers req for the workspace at dir: through its daemon when one
// runs, else directly on the store (an unmounted workspace). It never
// opens a store behind a mount whose daemon died (stale: 'reynfs unmount'
// cleans it first), nor one that lives inside a reynfs mount (it would
// read and write the store through that other workspace's daemon).
func call(ctx context.Context, o storeOptions, dir string, req daemon.Request) (*daemon.Response, error) {
	store, err := findStore(o, dir)
	if err != nil {
		return nil, err
	}
	resp, err := daemon.Call(ctx, store, req, 10*time.Minute)
	if !errors.Is(err, daemon.ErrNotRunning) {
		return resp, err
	}
	if m, ok := daemon.MountOfStore(store); ok {
		return nil, daemon.Unanswered(m)
	}
	if m, ok := daemon.InsideMount(store); ok {
		return nil, fmt.Errorf("%w: store %s is inside the reynfs mount %s (it overlaps that workspace): refusing to open it through that mount", errUsage, store, m.Point)
	}
	j, err := openOffline(dir, store, lookOnly(req))
	if err != nil {
		return nil, err
	}
	resp = daemon.Handle(&daemon.Service{J: j}, req)
	if cerr := j.Close(); cerr != nil && resp.Error == "" {
		return resp, cerr
	}
	return resp, daemon.ErrorOf(resp)
}
