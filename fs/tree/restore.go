package tree

import (
	"fmt"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// Restore (OpRestore) grafts a copy of a stored subtree into the tree: a
// file or directory brought back from a past state without a rewind. The
// copy gets new inode numbers, so it can never collide with an inode that
// lives on elsewhere in the tree (a file renamed since, say); hard links
// inside the subtree stay links, links to outside become separate files.

// CountInodes returns how many distinct inodes the stored subtree at h
// holds: the inode numbers an OpRestore of it uses.
func CountInodes(store cas.Store, h cas.Hash) (uint64, error) {
	seen := map[uint64]bool{}
	var walk func(h cas.Hash) error
	walk = func(h cas.Hash) error {
		in, err := getInode(store, h)
		if err != nil {
			return err
		}
		if seen[in.Ino] {
			return nil
		}
		seen[in.Ino] = true
		for _, e := range in.Entries {
			if err := walk(e.Object); err != nil {
				return fmt.Errorf("%s: %w", e.Name, err)
			}
		}
		return nil
	}
	if err := walk(h); err != nil {
		return 0, fmt.Errorf("count inodes of %s: %w", h.Short(), err)
	}
	return uint64(len(seen)), nil
}

func (t *Tree) applyRestore(r *journal.Record) error {
	d, err := t.dir(r.Parent)
	if err != nil {
		return err
	}
	if err := checkName(r.Name); err != nil {
		return err
	}
	// Build the copy before touching the tree: a missing object leaves it
	// unchanged.
	c := restoreCopy{store: t.store, next: r.Ino, byOld: map[uint64]*Node{}, now: r.Time}
	top, err := c.load(r.Root)
	if err != nil {
		return fmt.Errorf("restore %q: %w", r.Name, err)
	}
	for _, n := range c.nodes {
		if t.nodes[n.Ino] != nil || n.Ino == 0 {
			return fmt.Errorf("restore %q: inode %d in use: %w", r.Name, n.Ino, ErrInvalid)
		}
	}
	if ino, ok := d.entries[r.Name]; ok {
		t.removeTree(d, r.Name, t.nodes[ino], r.Time)
	}
	for _, n := range c.nodes {
		t.nodes[n.Ino] = n
	}
	t.attach(d, r.Name, top, r.Time)
	return nil
}

// removeTree removes name from d and, for a directory, everything below.
func (t *Tree) removeTree(d *Node, name string, n *Node, now int64) {
	if n.IsDir() {
		for _, child := range n.sortedNames() {
			t.removeTree(n, child, t.nodes[n.entries[child]], now)
		}
	}
	t.removeEntry(d, name, n, now)
}

// restoreCopy loads a stored subtree as new nodes numbered from next.
type restoreCopy struct {
	store cas.Store
	next  uint64
	byOld map[uint64]*Node // stored inode number → its copy
	nodes []*Node
	now   int64
}

func (c *restoreCopy) load(h cas.Hash) (*Node, error) {
	in, err := getInode(c.store, h)
	if err != nil {
		return nil, err
	}
	n := fromInode(in, h)
	n.Ino, n.obj, n.dirty = c.next, cas.Zero, true // the object names the old number
	n.Ctime = c.now
	c.next++
	c.byOld[in.Ino] = n
	c.nodes = append(c.nodes, n)
	for _, e := range in.Entries { // sorted by name
		child, seen := c.byOld[e.Ino]
		if seen {
			if child.IsDir() {
				return nil, fmt.Errorf("directory %q linked twice: %w", e.Name, cas.ErrCorrupt)
			}
			child.Nlink++
		} else if child, err = c.load(e.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name, err)
		}
		n.entries[e.Name] = child.Ino
		child.parents.add(n.Ino)
		if child.IsDir() {
			n.Nlink++
		}
	}
	return n, nil
}
