package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
)

// pathArgs splits a command line at "--" into the arguments before it
// and the paths after it (log -- PATH…, diff A B -- PATH…), as git does.
func pathArgs(cmd *cobra.Command, args []string) (before, paths []string) {
	if at := cmd.ArgsLenAtDash(); at >= 0 {
		return args[:at], args[at:]
	}
	return args, nil
}

// workspacePaths turns the paths given after "--" into paths below the
// workspace root, as the log and diff methods take them. A path inside a
// mounted workspace (absolute, or relative to the current directory
// there) is taken relative to that mount's root; a relative path given
// outside every mount is already one below the root ('reynfs log --store
// S -- src/').
func workspacePaths(args []string) ([]string, error) {
	if len(args) == 0 {
		return nil, nil
	}
	ms, _ := daemon.Mounts()
	out := make([]string, 0, len(args))
	for _, a := range args {
		abs, err := absPath(a)
		if err != nil {
			return nil, err
		}
		rel, ok := belowMount(ms, abs)
		switch {
		case ok:
			out = append(out, rel)
		case filepath.IsAbs(a):
			return nil, fmt.Errorf("%w: %s is not inside a mounted reynfs workspace (give it relative to the workspace root)", errUsage, a)
		default:
			out = append(out, filepath.ToSlash(filepath.Clean(a)))
		}
	}
	return out, nil
}

// belowMount is path relative to the innermost reynfs mount holding it.
func belowMount(ms []daemon.Mount, path string) (string, bool) {
	for p := path; ; p = filepath.Dir(p) {
		for i := len(ms) - 1; i >= 0; i-- {
			if ms[i].Point == p && ms[i].FsType == "fuse.reynfs" {
				rel, err := filepath.Rel(p, path)
				return filepath.ToSlash(rel), err == nil
			}
		}
		if p == "/" {
			return "", false
		}
	}
}
