package rewind

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
)

// Kept is what the write-back must leave as it found it in the directory
// (DESIGN invariant 14).
type Kept struct {
	// Paths changed underneath: they and everything below them are
	// neither overwritten nor removed (ExportOptions.Keep).
	Paths PathSet
	// Attrs are directories whose own mode, owner or xattrs changed
	// underneath: they keep those, and their entries are written as usual
	// (ExportOptions.KeepAttrs). The root is "".
	Attrs PathSet
	// List names both, sorted, for the report ("." is the root).
	List []string
}

// Underneath finds what changed in the directory top since reynfs last
// wrote base there: writes by a process that was inside the directory
// before the mount went over it, or made while it was unmounted. It
// imports the directory against base (a stat check: only changed files
// are read, their chunks stored) and returns what the export of t must
// keep, sorted. A path whose content already equals t's (a write-back
// that a crash interrupted had put it there) is not a change to keep. A
// directory is judged on its own attributes, its entries one by one: a
// chmod, chown or xattr set on it underneath is kept in Attrs, so that a
// write-back that writes inside it does not set the tree's attributes
// back over it. pin are paths an earlier write-back failed on (see
// Importer.Pin).
func Underneath(store cas.Store, top *os.File, base, t *tree.Tree, pin PathSet) (Kept, error) {
	return underneath(store, top, base, t, pin, 0)
}

// underneath is Underneath reading in full every file whose ctime is at or
// after cutoff (0: none; see Importer.Since).
func underneath(store cas.Store, top *os.File, base, t *tree.Tree, pin PathSet, cutoff int64) (Kept, error) {
	next := max(base.MaxIno(), t.MaxIno()) + 1
	im := &Importer{Store: store, Base: base, Pin: pin, Since: cutoff, Alloc: func() (uint64, error) { next++; return next - 1, nil }}
	u, err := im.ImportAt(top)
	if err != nil {
		return Kept{}, err
	}
	uroot, blobs, err := u.Root()
	if err != nil {
		return Kept{}, err
	}
	broot, bblobs, err := base.Root()
	if err != nil {
		return Kept{}, err
	}
	if uroot == broot {
		return Kept{}, nil
	}
	changes, err := DiffRoots(NewOverlay(store, blobs, bblobs), broot, uroot)
	if err != nil {
		return Kept{}, fmt.Errorf("changes underneath: %w", err)
	}
	k := Kept{Paths: PathSet{}, Attrs: PathSet{}}
	for _, c := range changes {
		un, _ := lookupPath(u, c.Path)
		tn, _ := lookupPath(t, c.Path)
		if c.Dir && c.Kind == Modified {
			bn, _ := lookupPath(base, c.Path)
			// Its mtime alone changes with its entries; a directory the
			// mount removed goes with its entries, judged one by one.
			if un != nil && tn != nil && bn != nil && tn.IsDir() && !sameDirAttrs(bn, un) && !sameDirAttrs(un, tn) {
				k.Attrs[exportRel(c.Path)] = true
				k.List = append(k.List, c.Path)
			}
			continue
		}
		if c.Kind == Removed && un == nil && tn == nil {
			continue // gone from both
		}
		if un != nil && tn != nil && sameContent(store, un, tn) {
			continue
		}
		k.Paths[c.Path] = true
		k.List = append(k.List, c.Path)
	}
	sort.Strings(k.List)
	return k, nil
}

// exportRel turns a change's path into the export's ("." is "").
func exportRel(p string) string {
	if p == "." {
		return ""
	}
	return p
}

// sameDirAttrs reports whether two directories carry the same mode, owner
// and xattrs: what a chmod, chown or setfattr on a directory changes.
func sameDirAttrs(a, b *tree.Node) bool {
	if a.Mode != b.Mode || a.Uid != b.Uid || a.Gid != b.Gid {
		return false
	}
	an, bn := a.XattrNames(), b.XattrNames()
	if len(an) != len(bn) {
		return false
	}
	for i, name := range an {
		if bn[i] != name {
			return false
		}
		av, _ := a.Xattr(name)
		bv, _ := b.Xattr(name)
		if !bytes.Equal(av, bv) {
			return false
		}
	}
	return true
}

// sameContent reports whether a and b would look the same in the
// directory: type, mode, owner, and content (a directory's entries are
// compared on their own; chunks in store).
func sameContent(store cas.Store, a, b *tree.Node) bool {
	if a.IsDir() && b.IsDir() {
		// A directory new in both: the write-back sets its attributes
		// last, so one a crash interrupted leaves them unset, and that
		// is no one's change.
		return true
	}
	if a.Mode != b.Mode || a.Uid != b.Uid || a.Gid != b.Gid {
		return false
	}
	switch {
	case a.IsReg():
		return a.Size == b.Size && sameFileBytes(store, a.ChunkHashes(), b.ChunkHashes())
	case a.IsLink():
		ta, _ := a.Readlink()
		tb, _ := b.Readlink()
		return ta == tb
	}
	return a.Rdev == b.Rdev
}

// sameFileBytes reports whether two chunk lists of a file of one size
// read the same: a hash that differs may still name the same bytes, one
// stored shorter than its slot (the rest reads as zeros) or zeros stored
// as data rather than as a hole, as the tree and a read of the directory
// store them. A chunk that cannot be read counts as different.
func sameFileBytes(store cas.Store, a, b []cas.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] == b[i] {
			continue
		}
		ab, aerr := chunkBytes(store, a[i])
		bb, berr := chunkBytes(store, b[i])
		if aerr != nil || berr != nil || !sameSlotBytes(ab, bb) {
			return false
		}
	}
	return true
}

// chunkBytes returns chunk h's stored bytes (none for a hole).
func chunkBytes(store cas.Store, h cas.Hash) ([]byte, error) {
	if h.IsZero() {
		return nil, nil
	}
	return store.Get(h)
}

// sameSlotBytes reports whether a and b, each the stored bytes of one
// chunk slot, read the same: equal where both reach, zeros past the
// shorter one.
func sameSlotBytes(a, b []byte) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return bytes.Equal(a, b[:len(a)]) && zero(b[len(a):])
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
