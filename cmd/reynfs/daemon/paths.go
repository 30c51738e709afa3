package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrUsage marks bad input: a missing directory, an overlapping store, a
// mountpoint already in use.
var ErrUsage = errors.New("usage")

// DefaultStore returns the per-project store for dir under
// $XDG_DATA_HOME/reynfs (or ~/.local/share/reynfs).
func DefaultStore(dir string) (string, error) {
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("store: %w", err)
		}
		base = filepath.Join(home, ".local", "share")
	}
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(base, "reynfs", filepath.Base(dir)+"-"+hex.EncodeToString(sum[:6])), nil
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

// Paths resolves and checks the project directory, mountpoint and store.
type Paths struct {
	Dir, Mountpoint, Store string
}

// Resolve makes the paths absolute and refuses what cannot work: a missing
// project directory, a store inside the mount or the project (mounting over
// your own data deadlocks the kernel), a project inside the store.
func Resolve(dir, at, store string) (Paths, error) {
	var p Paths
	abs, err := realDir(dir)
	if err != nil {
		return p, err
	}
	p.Dir, p.Mountpoint = abs, abs
	if at != "" {
		if p.Mountpoint, err = realDir(at); err != nil {
			return p, err
		}
	}
	if store == "" {
		if store, err = DefaultStore(p.Dir); err != nil {
			return p, err
		}
	}
	if p.Store, err = filepath.Abs(store); err != nil {
		return p, fmt.Errorf("store %s: %w", store, err)
	}
	p.Store = resolveExisting(p.Store)
	for _, d := range []string{p.Dir, p.Mountpoint} {
		if within(p.Store, d) || within(d, p.Store) {
			return p, fmt.Errorf("%w: store %s overlaps %s; put the store outside the project and the mount", ErrUsage, p.Store, d)
		}
	}
	if fi, err := os.Stat(p.Store); err == nil && !fi.IsDir() {
		return p, fmt.Errorf("%w: store %s is a file, not a store folder", ErrUsage, p.Store)
	}
	if at != "" && (within(p.Mountpoint, p.Dir) || within(p.Dir, p.Mountpoint)) {
		return p, fmt.Errorf("%w: mountpoint %s overlaps project %s", ErrUsage, p.Mountpoint, p.Dir)
	}
	ms, err := Mounts()
	if err != nil {
		return p, fmt.Errorf("mounts: %w", err)
	}
	return p, p.overlapsMounts(ms)
}

// overlapsMounts refuses paths that overlap a reynfs mount or its store
// (restic refuses to mount over its own data: a daemon serving a tree that
// contains, or is served from, another daemon's mount or store journals
// the other's writes and neither can unmount). The same mountpoint, and the
// same store, are left to the checks that say "already mounted" and "in
// use".
func (p Paths) overlapsMounts(ms []Mount) error {
	for _, m := range ms {
		if m.FsType != FsType {
			continue
		}
		if within(p.Store, m.Point) {
			return fmt.Errorf("%w: store %s is inside the reynfs mount %s (it overlaps that workspace); put it outside every workspace", ErrUsage, p.Store, m.Point)
		}
		if within(p.Dir, m.Point) && !(p.Dir == m.Point && p.Mountpoint == m.Point) {
			return fmt.Errorf("%w: project %s overlaps the reynfs mount %s: mounting inside a workspace is refused", ErrUsage, p.Dir, m.Point)
		}
		if within(p.Mountpoint, m.Point) && p.Mountpoint != m.Point {
			return fmt.Errorf("%w: mountpoint %s overlaps the reynfs mount %s: mounting inside a workspace is refused", ErrUsage, p.Mountpoint, m.Point)
		}
		if m.Source == p.Store || !filepath.IsAbs(m.Source) {
			continue
		}
		for _, d := range []string{p.Dir, p.Mountpoint, p.Store} {
			if within(d, m.Source) || within(m.Source, d) {
				return fmt.Errorf("%w: %s overlaps %s, the live store of the reynfs mount %s; keep workspaces and stores apart", ErrUsage, d, m.Source, m.Point)
			}
		}
	}
	return nil
}

// resolveExisting resolves the symlinks in the part of path that exists,
// so that a store named through a symlink is checked where it really is.
func resolveExisting(path string) string {
	rest := ""
	for p := path; ; p = filepath.Dir(p) {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		if p == "/" || p == "." {
			return path
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

func realDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrUsage, dir, err)
	}
	if err := clearIfDead(abs); err != nil { // a daemon killed with its mount on dir
		return "", err
	}
	st, err := os.Stat(abs)
	if errors.Is(err, syscall.ENOTCONN) {
		// A dead FUSE mount the check above saw alive a moment before
		// its connection was torn down.
		if m, ok := FindMount(abs); ok && strings.HasPrefix(m.FsType, "fuse") {
			if err := LazyUnmount(abs); err != nil {
				return "", err
			}
			st, err = os.Stat(abs)
		}
	}
	if err != nil {
		return "", fmt.Errorf("%w: %s: no such directory", ErrUsage, dir)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%w: %s: not a directory", ErrUsage, dir)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	return abs, nil
}

// DBPath is the Badger database inside a store folder.
func DBPath(store string) string { return filepath.Join(store, "db") }

// DiskUsage is what the files under dir occupy on disk (allocated blocks,
// as du counts them: Badger preallocates and sparsely fills its files).
func DiskUsage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, e os.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil // a table or log Badger's compaction removed meanwhile
		}
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store size: %w", err)
	}
	return total, nil
}
