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
	return t.graft(root, nil)
}

// GraftDiff is Graft that also returns what differs between t before and
// the tree named by root (see Change). It is the list rewind.DiffRoots
// makes of the two roots, found during the graft's own walk from t's
// nodes and the objects the graft reads, so the old objects are never
// read back from the store.
func (t *Tree) GraftDiff(root cas.Hash) ([]Change, error) {
	var cs []Change
	err := t.graft(root, &cs)
	return cs, err
}

func (t *Tree) graft(root cas.Hash, diff *[]Change) error {
	r := t.nodes[RootIno]
	if !r.dirty && r.obj == root {
		return nil
	}
	g := grafter{t: t, objs: map[uint64]*cas.Inode{}, hashes: map[uint64]cas.Hash{}, relinked: map[uint64]bool{}}
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
	if diff != nil {
		// Before anything changes: t's nodes are the old side.
		if err := g.diffRoot(r, in, root, diff); err != nil {
			return err
		}
	}
	// 2. Update or create the changed nodes; a changed directory's
	// entries are compared with the new list, so only the links that
	// differ are recorded (a file rewritten in a directory of 10,000
	// changes no link there).
	for _, ino := range g.order {
		g.update(ino)
	}
	// 3. Relink: removed entries lose their directory as parent, added
	// ones gain it.
	var lost []*Node
	for _, l := range g.links {
		n := t.nodes[l.ino]
		if n == nil {
			continue
		}
		if l.add {
			n.parents.add(l.dir)
		} else if unparent(n, l.dir) {
			lost = append(lost, n)
		}
		g.touched = append(g.touched, n)
	}
	// 4. Drop what no directory names any more, and below it.
	for _, n := range lost {
		g.drop(n)
	}
	// 5. Link counts: of the nodes whose names changed, of the changed
	// files, and of the directories whose entries changed (a directory's
	// count follows its own entries only; an unchanged list keeps it).
	for _, n := range g.touched {
		if t.nodes[n.Ino] == n && !n.IsDir() {
			n.Nlink = linkCount(t, n)
		}
	}
	for _, ino := range g.order {
		if n := t.nodes[ino]; n != nil && !n.IsDir() {
			n.Nlink = linkCount(t, n)
		}
	}
	for ino := range g.relinked {
		if n := t.nodes[ino]; n != nil && n.IsDir() {
			n.Nlink = linkCount(t, n)
		}
	}
	return nil
}

type grafter struct {
	t        *Tree
	objs     map[uint64]*cas.Inode // changed inodes: their new objects
	hashes   map[uint64]cas.Hash
	order    []uint64        // changed inodes, parents first
	links    []link          // the directory entries that differ, in order
	relinked map[uint64]bool // directories whose link count may change
	touched  []*Node
}

// link is one directory entry that a graft removes or adds.
type link struct {
	dir, ino uint64
	add      bool
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
	var old []cas.Entry // what t's directory in.Ino has, when it has one
	if d := g.t.nodes[in.Ino]; d != nil && d.IsDir() {
		old = g.t.entryList(d)
	}
	return mergeEntries(old, in.Entries, func(_, e *cas.Entry) error {
		if e == nil {
			return nil
		}
		if n := g.t.nodes[e.Ino]; n != nil && !n.dirty && n.obj == e.Object && n.pending == nil {
			return nil // the same subtree, elsewhere (moved, or another link)
		}
		cin, err := getInode(g.t.store, e.Object)
		if err != nil {
			return fmt.Errorf("graft %q: %w", e.Name, err)
		}
		if cin.Ino != e.Ino {
			return fmt.Errorf("graft %q: entry says inode %d, object %d: %w", e.Name, e.Ino, cin.Ino, cas.ErrCorrupt)
		}
		return g.read(cin, e.Object)
	})
}

// update makes node ino match its new object (a new node if t lacks it)
// and records the entries of a directory that differ from what it had.
func (g *grafter) update(ino uint64) {
	in, h := g.objs[ino], g.hashes[ino]
	fresh := fromInode(in, h)
	n := g.t.nodes[ino]
	if n == nil {
		g.t.nodes[ino] = fresh
		if fresh.IsDir() {
			fresh.setEntCache(in.Entries, h)
			g.relinked[ino] = true
			for _, e := range in.Entries {
				fresh.entries[e.Name] = e.Ino
				g.links = append(g.links, link{ino, e.Ino, true})
			}
		}
		return
	}
	var oldList []cas.Entry
	if n.IsDir() {
		oldList = g.t.entryList(n) // n is still clean and unchanged
	}
	old, wasDir, nlink, parents := n.entries, n.IsDir(), n.Nlink, n.parents
	*n = *fresh
	n.parents, n.Nlink = parents, nlink
	if wasDir != n.IsDir() {
		// Not expected (inode numbers are not reused), but then the
		// parents' counts of subdirectories change.
		for p := range parents.all() {
			g.relinked[p] = true
		}
	}
	if !n.IsDir() {
		for _, c := range old {
			g.links = append(g.links, link{ino, c, false})
		}
		return
	}
	if !wasDir {
		old = nil
	}
	g.diffEntries(n, old, oldList, in.Entries)
	n.setEntCache(in.Entries, h)
}

// diffEntries makes directory n's entries the list es (sorted by name),
// changing its old map in place and recording only the links that
// differ; oldList is the old map as a sorted list.
func (g *grafter) diffEntries(n *Node, old map[string]uint64, oldList, es []cas.Entry) {
	if old == nil {
		old, oldList = make(map[string]uint64, len(es)), nil
	}
	n.entries = old
	changed := false
	_ = mergeEntries(oldList, es, func(o, e *cas.Entry) error {
		switch {
		case e == nil:
			delete(old, o.Name)
			g.links = append(g.links, link{n.Ino, o.Ino, false})
		case o != nil && o.Ino == e.Ino:
			return nil // only the object differs: the same link
		default:
			if o != nil {
				g.links = append(g.links, link{n.Ino, o.Ino, false})
			}
			old[e.Name] = e.Ino
			g.links = append(g.links, link{n.Ino, e.Ino, true})
		}
		changed = true
		return nil
	})
	if changed {
		g.relinked[n.Ino] = true
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
