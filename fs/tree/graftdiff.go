package tree

import (
	"bytes"
	"fmt"
	"path"
	"slices"

	"github.com/reynfs/reynfs/cas"
)

// ChangeKind says how a path differs between two trees.
type ChangeKind uint8

// Change kinds.
const (
	Added ChangeKind = iota + 1
	Removed
	Modified
)

// Change is one path that differs between the tree before a graft and
// after it. Entry says the directory entry (Parent, Name) itself changed,
// not only the inode it names: the kernel's cached name is wrong.
type Change struct {
	Path     string
	Kind     ChangeKind
	Ino      uint64
	Dir      bool
	Mode     uint32
	Old, New cas.Hash
	Entry    bool
	Parent   uint64
	Name     string
}

// side is one inode of the new tree: the object the graft read, or t's
// node when t already holds that very object (then the graft skipped it).
type side struct {
	n  *Node
	in *cas.Inode
	h  cas.Hash
}

func (s side) mode() uint32 {
	if s.in != nil {
		return s.in.Mode
	}
	return s.n.Mode
}

func (s side) isDir() bool { return isDirMode(s.mode()) }

// newSide returns the new tree's inode ino, named h.
func (g *grafter) newSide(ino uint64, h cas.Hash) (side, error) {
	if in := g.objs[ino]; in != nil && g.hashes[ino] == h {
		return side{in: in, h: h}, nil
	}
	if n := g.t.nodes[ino]; n != nil && !n.dirty && n.obj == h {
		return side{n: n, h: h}, nil
	}
	return side{}, fmt.Errorf("graft: inode %d object %s neither read nor held: %w", ino, h.Short(), cas.ErrCorrupt)
}

// entries returns the new side's directory entries, sorted by name.
func (g *grafter) entries(s side) []cas.Entry {
	if s.in != nil {
		return s.in.Entries
	}
	return g.t.entryList(s.n)
}

// diffRoot lists the changes from t's root r (before the graft changes
// anything) to the root object in, named h. It walks as DiffRoots does:
// into directories whose objects differ, listing every path below one that
// was added or removed, in any order (the caller sorts).
func (g *grafter) diffRoot(r *Node, in *cas.Inode, h cas.Hash, out *[]Change) error {
	if !sameAttrs(r, in) {
		*out = append(*out, Change{Path: ".", Kind: Modified, Ino: in.Ino, Dir: true, Mode: in.Mode, Old: r.obj, New: h})
	}
	return g.diffDirs("", r, in, out)
}

// diffDirs compares old directory a (a node of t) with its new object b,
// the same inode.
func (g *grafter) diffDirs(dir string, a *Node, b *cas.Inode, out *[]Change) error {
	t := g.t
	return mergeEntries(t.entryList(a), b.Entries, func(oe, e *cas.Entry) error {
		var o *Node
		if oe != nil {
			if o = t.nodes[oe.Ino]; o == nil {
				return fmt.Errorf("graft: entry %q names no inode %d", oe.Name, oe.Ino)
			}
		}
		if e == nil {
			g.removed(path.Join(dir, oe.Name), a.Ino, oe.Name, o, out)
			return nil
		}
		p := path.Join(dir, e.Name)
		nb, err := g.newSide(e.Ino, e.Object)
		if err != nil {
			return err
		}
		if o == nil {
			return g.added(p, b.Ino, *e, nb, out)
		}
		if oe.Ino != e.Ino || o.Mode&cas.ModeType != nb.mode()&cas.ModeType {
			g.removed(p, a.Ino, e.Name, o, out)
			return g.added(p, b.Ino, *e, nb, out)
		}
		if !nb.isDir() || nb.in == nil || !sameAttrs(o, nb.in) {
			*out = append(*out, Change{Path: p, Kind: Modified, Ino: e.Ino, Dir: nb.isDir(), Mode: nb.mode(), Old: o.obj, New: e.Object, Parent: b.Ino, Name: e.Name})
		}
		if !nb.isDir() {
			return nil
		}
		if nb.in == nil { // its object differs from o's: the graft read it
			return fmt.Errorf("graft: directory %d object %s not read: %w", e.Ino, e.Object.Short(), cas.ErrCorrupt)
		}
		return g.diffDirs(p, o, nb.in, out)
	})
}

// mergeEntries walks two entry lists sorted by name side by side and calls
// fn for each name that is in only one of them (the other nil) or in both
// with another inode or object. A changed directory of 10,000 entries that
// differ in one costs a comparison per entry, no lookup.
func mergeEntries(old, new []cas.Entry, fn func(o, e *cas.Entry) error) error {
	i, j := 0, 0
	for i < len(old) || j < len(new) {
		var err error
		switch {
		case j == len(new) || (i < len(old) && old[i].Name < new[j].Name):
			err = fn(&old[i], nil)
			i++
		case i == len(old) || new[j].Name < old[i].Name:
			err = fn(nil, &new[j])
			j++
		default:
			if old[i] != new[j] {
				err = fn(&old[i], &new[j])
			}
			i++
			j++
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// added lists the new entry e at path p and, for a directory, everything
// below it.
func (g *grafter) added(p string, parent uint64, e cas.Entry, s side, out *[]Change) error {
	*out = append(*out, Change{Path: p, Kind: Added, Ino: e.Ino, Dir: s.isDir(), Mode: s.mode(), New: e.Object, Entry: true, Parent: parent, Name: e.Name})
	if !s.isDir() {
		return nil
	}
	for _, c := range g.entries(s) {
		cs, err := g.newSide(c.Ino, c.Object)
		if err != nil {
			return err
		}
		if err := g.added(path.Join(p, c.Name), e.Ino, c, cs, out); err != nil {
			return err
		}
	}
	return nil
}

// removed lists t's node o, named name in parent at path p, and, for a
// directory, everything below it.
func (g *grafter) removed(p string, parent uint64, name string, o *Node, out *[]Change) {
	*out = append(*out, Change{Path: p, Kind: Removed, Ino: o.Ino, Dir: o.IsDir(), Mode: o.Mode, Old: o.obj, Entry: true, Parent: parent, Name: name})
	for cname, c := range o.entries {
		if child := g.t.nodes[c]; child != nil {
			g.removed(path.Join(p, cname), o.Ino, cname, child, out)
		}
	}
}

// sameAttrs reports whether node n and object in agree on everything but
// directory entries (as comparing their objects without entries would).
func sameAttrs(n *Node, in *cas.Inode) bool {
	if n.Ino != in.Ino || n.Mode != in.Mode || n.Uid != in.Uid || n.Gid != in.Gid || n.Rdev != in.Rdev ||
		n.Size != in.Size || n.Atime != in.Atime || n.Mtime != in.Mtime || n.Ctime != in.Ctime ||
		n.target != in.Target || len(n.xattrs) != len(in.Xattrs) {
		return false
	}
	if n.IsReg() && !slices.Equal(n.chunks, in.Chunks) {
		return false
	}
	for _, x := range in.Xattrs {
		v, ok := n.xattrs[x.Name]
		if !ok || !bytes.Equal(v, x.Value) {
			return false
		}
	}
	return true
}
