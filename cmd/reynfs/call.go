package main

import (
	"errors"
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
