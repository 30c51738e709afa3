package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
)

// storeOptions are the flags every command that talks to a workspace has.
type storeOptions struct {
	store string
}

// findStore names the store a command acts on: --store, else the reynfs
// mount at or above path, else the default store of the project path.
func findStore(o storeOptions, path string) (string, error) {
	if o.store != "" {
		return filepath.Abs(o.store)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", errUsage, path, err)
	}
	// The mount table first, by the path as written: resolving symlinks
	// stats every component, and a component on a stopped or hung
	// daemon's mount would keep the command waiting.
	ms, _ := daemon.Mounts()
	if store, ok := storeOfMount(ms, abs); ok {
		return store, nil
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	if store, ok := storeOfMount(ms, abs); ok {
		return store, nil
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("%w: %s: no such directory", errUsage, path)
	}
	return daemon.DefaultStore(abs)
}

// storeOfMount returns the store of the innermost reynfs mount holding
// path (the mount's source is its store).
func storeOfMount(ms []daemon.Mount, path string) (string, bool) {
	for p := path; ; p = filepath.Dir(p) {
		for i := len(ms) - 1; i >= 0; i-- {
			if ms[i].Point == p && ms[i].FsType == "fuse.reynfs" {
				return ms[i].Source, true
			}
		}
		if p == "/" {
			return "", false
		}
	}
}

func absPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", errUsage, p, err)
	}
	return abs, nil
}
