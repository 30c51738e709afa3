package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
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

// callDaemon is daemon.Call for a request only a running daemon serves
// (checkpoint, run, runs), with notServed's explanation when none answers.
func callDaemon(ctx context.Context, dir, store string, p api.Params, res any, timeout time.Duration) error {
	return notServed(daemon.Call(ctx, store, p, res, timeout), dir, store)
}

// notServed says, when no daemon answered for dir, whether dir is a
// workspace at all and what to run: a bare "no reynfs daemon is serving
// this store (PATH)" in a directory never mounted named a store that does
// not exist. It keeps daemon.ErrNotRunning underneath (exit 5, kind
// not_running).
func notServed(err error, dir, store string) error {
	if !errors.Is(err, daemon.ErrNotRunning) {
		return err
	}
	if m, ok := daemon.MountOfStore(store); ok {
		return daemon.Unanswered(m) // dead or hung: say so, and the fix (exit 6)
	}
	if abs, aerr := filepath.Abs(dir); aerr == nil {
		dir = abs
	}
	// With --store naming another store than dir's own, dir is not what
	// the message is about: 'status --store /typo' inside a workspace.
	if def, derr := daemon.DefaultStore(dir); derr != nil || def != store {
		if checkStoreExists(dir, store) != nil {
			return &explainedError{fmt.Sprintf("no reynfs store in %s: 'reynfs mount DIR --store %s' makes one", store, store), err}
		}
		return &explainedError{fmt.Sprintf("the workspace of store %s is not mounted: 'reynfs mount DIR --store %s' first", store, store), err}
	}
	if checkStoreExists(dir, store) != nil {
		return &explainedError{fmt.Sprintf("%s is not a reynfs workspace (no store in %s): 'reynfs mount DIR' makes one", dir, store), err}
	}
	return &explainedError{fmt.Sprintf("%s is not mounted (store %s): 'reynfs mount DIR' first", dir, store), err}
}

// explainedError is err said in the user's words; errors.Is and As still
// see err (and so its exit code and API kind).
type explainedError struct {
	msg string
	err error
}

func (e *explainedError) Error() string { return e.msg }
func (e *explainedError) Unwrap() error { return e.err }
