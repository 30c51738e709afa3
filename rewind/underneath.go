package rewind

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
)

// Underneath finds what changed in the directory top since reynfs last
// wrote base there: writes by a process that was inside the directory
// before the mount went over it, or made while it was unmounted. It
// imports the directory against base (a stat check: only changed files
// are read, their chunks stored) and returns the changed paths that the
// export of t must keep (DESIGN invariant 14), sorted. A path whose
// content already equals t's (a write-back that a crash interrupted had
// put it there) is not a change to keep, nor is a directory whose
// attributes alone changed (its entries are judged one by one). pin are
// paths an earlier write-back failed on (see Importer.Pin).
func Underneath(store cas.Store, top *os.File, base, t *tree.Tree, pin PathSet) (PathSet, []string, error) {
	next := max(base.MaxIno(), t.MaxIno()) + 1
	im := &Importer{Store: store, Base: base, Pin: pin, Alloc: func() (uint64, error) { next++; return next - 1, nil }}
	u, err := im.ImportAt(top)
	if err != nil {
		return nil, nil, err
	}
	uroot, blobs, err := u.Root()
	if err != nil {
		return nil, nil, err
	}
	broot, bblobs, err := base.Root()
	if err != nil {
		return nil, nil, err
	}
	if uroot == broot {
		return nil, nil, nil
	}
	changes, err := DiffRoots(NewOverlay(store, blobs, bblobs), broot, uroot)
	if err != nil {
		return nil, nil, fmt.Errorf("changes underneath: %w", err)
	}
	keep := PathSet{}
	for _, c := range changes {
		if c.Dir && c.Kind == Modified {
			continue
		}
		un, _ := lookupPath(u, c.Path)
		tn, _ := lookupPath(t, c.Path)
		if c.Kind == Removed && un == nil && tn == nil {
			continue // gone from both
		}
		if un != nil && tn != nil && sameContent(u, un, t, tn) {
			continue
		}
		keep[c.Path] = true
	}
	paths := make([]string, 0, len(keep))
	for p := range keep {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return keep, paths, nil
}

// sameContent reports whether a (in tree at) and b (in tree bt) would
// look the same in the directory: type, mode, owner, and content (a
// directory's entries are compared on their own).
func sameContent(at *tree.Tree, a *tree.Node, bt *tree.Tree, b *tree.Node) bool {
	if a.IsDir() && b.IsDir() {
		// Its attributes are set last: a write-back a crash interrupted
		// leaves them unset, and that is no one's change.
		return true
	}
	if a.Mode != b.Mode || a.Uid != b.Uid || a.Gid != b.Gid {
		return false
	}
	switch {
	case a.IsReg():
		return a.Size == b.Size && sameChunks(a.ChunkHashes(), b.ChunkHashes())
	case a.IsLink():
		ta, _ := a.Readlink()
		tb, _ := b.Readlink()
		return ta == tb
	case a.IsDir():
		return true
	}
	return a.Rdev == b.Rdev
}

// Sig is what lstat says of a path, kept to tell later whether someone
// changed the path since (a path a write-back failed on). Like the import's
// stat check it leaves out ctime: chattr or a chown back does not make a
// failed path someone's change.
type Sig struct {
	Absent bool   `json:"absent,omitempty"`
	Mode   uint32 `json:"mode,omitempty"`
	Ino    uint64 `json:"ino,omitempty"`
	Size   int64  `json:"size,omitempty"`
	Mtime  int64  `json:"mtime,omitempty"`
}

// SigAt stats rel below top without following a symlink.
func SigAt(top *os.File, rel string) Sig {
	dir, name := splitRel(rel)
	d, err := openDirBeneath(top, dir)
	if err != nil {
		return Sig{Absent: errors.Is(err, unix.ENOENT)}
	}
	defer d.Close()
	st, err := lstatAt(d, name)
	if err != nil {
		return Sig{Absent: errors.Is(err, unix.ENOENT)}
	}
	return Sig{Mode: st.Mode, Ino: st.Ino, Size: st.Size, Mtime: mtime(&st)}
}
