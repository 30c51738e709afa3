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
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	ms, _ := daemon.Mounts()
	for p := abs; ; p = filepath.Dir(p) {
		for i := len(ms) - 1; i >= 0; i-- {
			if ms[i].Point == p && ms[i].FsType == "fuse.reynfs" {
				return ms[i].Source, nil
			}
		}
		if p == "/" {
			break
		}
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("%w: %s: no such directory", errUsage, path)
	}
	return daemon.DefaultStore(abs)
}

func absPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", errUsage, p, err)
	}
	return abs, nil
}
