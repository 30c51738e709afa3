package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
)

// call answers req for the workspace at dir: through its daemon when one
// runs, else directly on the store (an unmounted workspace).
func call(o storeOptions, dir string, req daemon.Request) (*daemon.Response, error) {
	store, err := findStore(o, dir)
	if err != nil {
		return nil, err
	}
	resp, err := daemon.Call(store, req, 10*time.Minute)
	if !errors.Is(err, daemon.ErrNotRunning) {
		return resp, err
	}
	if _, serr := os.Stat(daemon.DBPath(store)); serr != nil {
		return nil, fmt.Errorf("%w: no reynfs store for %s (looked in %s); mount it first", errUsage, dir, store)
	}
	j, err := openOffline(store, lookOnly[req.Op])
	if err != nil {
		return nil, err
	}
	resp = daemon.Handle(&daemon.Service{J: j}, req)
	if cerr := j.Close(); cerr != nil && resp.Error == "" {
		return resp, cerr
	}
	return resp, daemon.ErrorOf(resp)
}
