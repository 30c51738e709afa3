package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind/replica"
)

// followHelp is mount's help for --follow.
const followHelp = `--follow URL#WS makes DIR a read-only follower of workspace WS (default: DIR's base
name) of the remote at URL (or NAME#WS, a remote the store names): when DIR has no
store yet, it is cloned lazily first (as 'clone --lazy': data fetched on first read,
the rest by the prefetcher unless --prefetch=false). The mount is read-only (EROFS),
and every --follow-every (1 s) the daemon reads the remote's HEAD and, when it moved,
fetches the new records and serves the new head, readers seeing the old tree or the
new one. The store remembers it: 'reynfs mount DIR' keeps following, and push,
--sync continuous, checkpoint, rewind and the like are refused ("DIR follows
SRC: read-only"). 'reynfs status' shows the seqs, the lag and the state.`

// followDir creates a follower's missing DIR (as clone does); it
// reports whether it did.
func followDir(o mountOptions, dir string) (bool, error) {
	if o.follow == "" || o.readyFd != 0 {
		return false, nil
	}
	abs, err := absPath(dir)
	if err != nil {
		return false, err
	}
	if _, err := os.Lstat(abs); !os.IsNotExist(err) {
		return false, nil
	}
	if err := os.Mkdir(abs, 0o755); err != nil {
		return false, fmt.Errorf("%w: %v", errUsage, err)
	}
	return true, nil
}

// prepareFollow makes the store of paths a follower of src (mount
// --follow): a lazy clone of src's head when there is no store yet, else
// a store that follows src already, or a clone of it with no record of
// its own, marked a follower now.
func prepareFollow(ctx context.Context, o mountOptions, paths daemon.Paths) error {
	raw, ws, found := strings.Cut(o.follow, "#")
	if !found || ws == "" {
		ws = filepath.Base(paths.Dir)
	}
	if raw == "" {
		return fmt.Errorf("%w: --follow %q: want URL#WS or NAME#WS", errUsage, o.follow)
	}
	if err := replica.CheckName(ws); err != nil {
		return fmt.Errorf("%w: --follow: workspace %v", errUsage, err)
	}
	src := raw + "#" + ws
	isURL := strings.Contains(raw, "://")
	if !storeExists(paths.Store) {
		if !isURL {
			return fmt.Errorf("%w: --follow %s: %s has no store yet to name remote %s; give the remote's URL", errUsage, src, paths.Dir, raw)
		}
		co := cloneOptions{storeOptions: storeOptions{store: paths.Store}, lazy: true,
			prefetch: !o.prefetchSet || o.prefetch, quiet: true}
		if err := runClone(ctx, co, src, paths.Dir); err != nil {
			return err
		}
		return markFollower(ctx, paths, replica.FollowConfig{Source: src, URL: raw, WS: ws}, true)
	}
	return markFollower(ctx, paths, replica.FollowConfig{Source: src, URL: raw, WS: ws}, false)
}

// markFollower records c in the store (a fresh clone of it: fresh), or
// checks that an existing store may follow it.
func markFollower(ctx context.Context, paths daemon.Paths, c replica.FollowConfig, fresh bool) error {
	j, err := journal.Open(daemon.DBPath(paths.Store), journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		return err
	}
	defer j.Close()
	if !strings.Contains(c.URL, "://") {
		rs, err := replica.Remotes(j)
		if err != nil {
			return err
		}
		u, ok := rs[c.URL]
		if !ok {
			return fmt.Errorf("%w: --follow %s: the store names no remote %s", errUsage, c.Source, c.URL)
		}
		c.URL = u
	}
	if fresh {
		return replica.SetFollow(j, c)
	}
	old, err := replica.Following(j)
	if err != nil {
		return err
	}
	if old != nil {
		if old.URL != c.URL || old.WS != c.WS {
			return fmt.Errorf("%w: %s follows %s already; --follow %s needs a new directory", errUsage, paths.Dir, old.Source, c.Source)
		}
		return nil
	}
	// A clone of c that holds nothing of its own may become its follower.
	b, err := openRemote(ctx, c.URL)
	if err != nil {
		return err
	}
	got, err := replica.FetchedWorkspaces(ctx, j, b)
	if err != nil {
		return fmt.Errorf("--follow %s: %w", c.Source, err)
	}
	if seq, ok := got[c.WS]; !ok || seq != j.Head() {
		return fmt.Errorf("%w: %s has a store that is not a clone of %s holding nothing of its own; --follow needs a new directory", errUsage, paths.Dir, c.Source)
	}
	return replica.SetFollow(j, c)
}
