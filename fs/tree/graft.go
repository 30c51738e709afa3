package tree

import (
	"fmt"
	"maps"
	"slices"

	"github.com/reynfs/reynfs/cas"
)

// Graft makes t, in place, the tree named by root: nodes whose inode
// object is unchanged stay as they are (the same *Node, the same inode
// number), changed ones are updated from their new objects, new ones are
// loaded and gone ones dropped. The work is proportional to what differs,
// as the Merkle hashes find it, not to the tree: a rewind of 100 files in
// a tree of 100k touches 100 files and their directories.
//
// t must be clean (Root called since its last change) with no pending
// data. Dropped nodes do not go through OnDrop (a rewind makes every
// handle stale anyway). On error t is left inconsistent: the caller must
// replace it (rebuild it from the store).
func (t *Tree) Graft(root cas.Hash) error {
	r := t.nodes[RootIno]
	if !r.dirty && r.obj == root {
		return nil
	}
	g := grafter{t: t, objs: map[uint64]*cas.Inode{}, hashes: map[uint64]cas.Hash{}, oldEntries: map[uint64]map[string]uint64{}}
	// 1. Read every object that differs, top down, stopping at subtrees
	// whose hash t already has.
	in, err := getInode(t.store, root)
	if err != nil {
		return fmt.Errorf("graft: root: %w", err)
	}
	if in.Ino != RootIno || !isDirMode(in.Mode) {
		return fmt.Errorf("graft: root %s is not a root directory: %w", root.Short(), cas.ErrCorrupt)
	}
	if err := g.read(in, root); err != nil {
		return err
	}
	// 2. Update or create the changed nodes, remembering the entries the
	// changed directories had.
	for _, ino := range g.order {
		g.update(ino)
	}
	// 3. Relink: the changed directories' old entries lose them as parent,
	// the new entries gain it.
	var lost []*Node
	for _, ino := range g.order {
		d := t.nodes[ino]
		if !d.IsDir() {
			continue
		}
		for _, c := range g.oldEntries[ino] {
			if n := t.nodes[c]; n != nil {
				if unparent(n, ino) {
					lost = append(lost, n)
				}
				g.touched = append(g.touched, n)
			}
		}
		for _, c := range d.entries {
			n := t.nodes[c]
			n.parents.add(ino)
			g.touched = append(g.touched, n)
		}
	}
	// 4. Drop what no directory names any more, and below it.
	for _, n := range lost {
		g.drop(n)
	}
	// 5. Link counts: of the files whose names changed, and of the changed
	// directories (a directory's count follows its own entries only).
	for _, n := range g.touched {
		if t.nodes[n.Ino] == n && !n.IsDir() {
			n.Nlink = linkCount(t, n)
		}
	}
	for _, ino := range g.order {
		if n := t.nodes[ino]; n != nil {
			n.Nlink = linkCount(t, n)
		}
	}
	return nil
}

type grafter struct {
	t          *Tree
	objs       map[uint64]*cas.Inode // changed inodes: their new objects
	hashes     map[uint64]cas.Hash
	order      []uint64 // changed inodes, parents first
	oldEntries map[uint64]map[string]uint64
	touched    []*Node
}

func isDirMode(mode uint32) bool { return mode&0o170000 == 0o040000 }

// read records in (named h) as changed and descends into the entries t
// does not already hold unchanged.
func (g *grafter) read(in *cas.Inode, h cas.Hash) error {
	if _, seen := g.objs[in.Ino]; seen {
		if g.hashes[in.Ino] != h {
			return fmt.Errorf("graft: inode %d linked twice with different objects: %w", in.Ino, cas.ErrCorrupt)
		}
		return nil
	}
	g.objs[in.Ino], g.hashes[in.Ino] = in, h
	g.order = append(g.order, in.Ino)
	for _, e := range in.Entries {
		if n := g.t.nodes[e.Ino]; n != nil && !n.dirty && n.obj == e.Object && n.pending == nil {
			continue // the same subtree
		}
		cin, err := getInode(g.t.store, e.Object)
		if err != nil {
			return fmt.Errorf("graft %q: %w", e.Name, err)
		}
		if cin.Ino != e.Ino {
			return fmt.Errorf("graft %q: entry says inode %d, object %d: %w", e.Name, e.Ino, cin.Ino, cas.ErrCorrupt)
		}
		if err := g.read(cin, e.Object); err != nil {
			return err
		}
	}
	return nil
}

// update makes node ino match its new object (a new node if t lacks it).
func (g *grafter) update(ino uint64) {
	in, h := g.objs[ino], g.hashes[ino]
	fresh := fromInode(in, h)
	n := g.t.nodes[ino]
	if n == nil {
		g.t.nodes[ino] = fresh
		n = fresh
	} else {
		if n.IsDir() {
			g.oldEntries[ino] = n.entries
		}
		parents := n.parents
		*n = *fresh
		n.parents = parents
	}
	if n.IsDir() {
		n.entries = make(map[string]uint64, len(in.Entries))
		for _, e := range in.Entries {
			n.entries[e.Name] = e.Ino
		}
	}
}

// unparent drops one link from dir p to n; it reports whether n has no
// parent left.
func unparent(n *Node, p uint64) bool {
	return n.parents.remove(p)
}

// drop removes n if nothing names it, and then what only it named.
func (g *grafter) drop(n *Node) {
	if n.parents.len() > 0 || n.Ino == RootIno || g.t.nodes[n.Ino] != n {
		return
	}
	delete(g.t.nodes, n.Ino)
	if !n.IsDir() {
		return
	}
	for _, c := range slices.Collect(maps.Values(n.entries)) {
		if child := g.t.nodes[c]; child != nil {
			unparent(child, n.Ino)
			g.touched = append(g.touched, child)
			g.drop(child)
		}
	}
}

// linkCount is n's st_nlink from its links: a directory counts "." and
// its subdirectories' "..", anything else its names.
func linkCount(t *Tree, n *Node) uint32 {
	if n.IsDir() {
		k := uint32(2)
		for _, c := range n.entries {
			if child := t.nodes[c]; child != nil && child.IsDir() {
				k++
			}
		}
		return k
	}
	k := 0
	for _, c := range n.parents.all() {
		k += c
	}
	return uint32(k)
}
