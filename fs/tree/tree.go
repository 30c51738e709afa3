package tree

import (
	"fmt"
	"syscall"

	"github.com/reynfs/reynfs/cas"
)

// Tree is the pure model of a file-system tree: inodes keyed by number,
// changed only by Apply (and, for written-but-unjournaled data, by the
// content methods). It is not safe for concurrent use; Live adds the lock.
type Tree struct {
	store cas.Store
	nodes map[uint64]*Node

	// OnDrop, if set, is called when an inode loses its last name. The
	// live file system keeps such a node while it is still open.
	OnDrop func(*Node)

	// sums: hashes of whole pending chunks computed before the live
	// lock (content.go; slotnotes.go), by node and chunk index.
	sums map[*Node]map[uint64]ChunkSum
	// bases: the stored chunk each read-modify-written pending chunk
	// was made from, by node and chunk index (slotnotes.go, setBase).
	bases map[*Node]map[uint64]baseNote
	// chunkSums: the BLAKE3 subtree hashes of the chunks Flush hashed
	// from a base (grownSum), so that the next read-modify-write of one
	// hashes what it changed, not the chunk; made by the first Flush
	// that needs it.
	chunkSums *cas.ChunkSums
	// recycle, when set (the live tree's staging), takes back a pooled
	// base buffer (baseNote.pooled) whose note the tree drops.
	recycle func(...[]byte)
	// cuts: the stored chunk a truncation cut from each slot, by node
	// and chunk index, until the node's next data flush names it as the
	// new chunk's Base (slotnotes.go, noteCut): a file rewritten whole
	// (open with O_TRUNC, write) is then stored as a delta against its
	// previous version. Only a hint: bounded, and dropped freely.
	cuts map[*Node]map[uint64]cas.Hash
	// grows: per node, the BLAKE3 state after the bytes of its last,
	// partial chunk as the last flush hashed them (slotnotes.go,
	// grownSum): a file that grows a little per fsync hashes what it
	// appended, not its chunk again. Only a hint: bounded, checked
	// against the bytes before use, and dropped freely.
	grows map[*Node]*growNote
}

// New returns a tree holding only an empty root directory.
func New(store cas.Store, mode, uid, gid uint32, now int64) *Tree {
	t := &Tree{store: store, nodes: map[uint64]*Node{}}
	root := newNode(RootIno, syscall.S_IFDIR|mode&^syscall.S_IFMT, uid, gid, 0, now)
	t.nodes[RootIno] = root
	return t
}

// Store returns the object store the tree reads content from.
func (t *Tree) Store() cas.Store { return t.store }

// Node returns the inode ino, or nil.
func (t *Tree) Node(ino uint64) *Node { return t.nodes[ino] }

// Len returns the number of inodes in the tree.
func (t *Tree) Len() int { return len(t.nodes) }

// MaxIno returns the highest inode number in the tree.
func (t *Tree) MaxIno() uint64 {
	var m uint64
	for ino := range t.nodes {
		m = max(m, ino)
	}
	return m
}

// Lookup returns the child of directory parent called name.
func (t *Tree) Lookup(parent uint64, name string) (*Node, error) {
	d, err := t.dir(parent)
	if err != nil {
		return nil, err
	}
	if len(name) > MaxName {
		return nil, ErrNameTooLong
	}
	ino, ok := d.entries[name]
	if !ok {
		return nil, ErrNotExist
	}
	return t.nodes[ino], nil
}

// Readdir returns a directory's entries sorted by name.
func (t *Tree) Readdir(ino uint64) ([]Dirent, error) {
	d, err := t.dir(ino)
	if err != nil {
		return nil, err
	}
	out := make([]Dirent, 0, len(d.entries))
	for _, name := range d.sortedNames() {
		c := t.nodes[d.entries[name]]
		out = append(out, Dirent{Name: name, Ino: c.Ino, Mode: c.Mode})
	}
	return out, nil
}

// Parent returns a directory's parent inode number (the root is its own).
func (t *Tree) Parent(ino uint64) uint64 {
	if n := t.nodes[ino]; n != nil && n.IsDir() {
		return n.parent()
	}
	return RootIno
}

// Readlink returns a symlink's target.
func (n *Node) Readlink() (string, error) {
	if !n.IsLink() {
		return "", ErrInvalid
	}
	return n.target, nil
}

// Xattr returns the value of one extended attribute.
func (n *Node) Xattr(name string) ([]byte, error) {
	v, ok := n.xattrs[name]
	if !ok {
		return nil, ErrNoAttr
	}
	return v, nil
}

// XattrNames returns the names of the node's extended attributes, sorted.
func (n *Node) XattrNames() []string {
	return sortedKeys(n.xattrs)
}

// Check verifies the tree's structural invariants: every entry names a
// node, link counts match the entries, directories have one parent. Tests
// call it after every step.
func (t *Tree) Check() error {
	links := map[uint64]uint32{}
	subdirs := map[uint64]uint32{}
	for ino, n := range t.nodes {
		if n.Ino != ino {
			return fmt.Errorf("node %d keyed as %d", n.Ino, ino)
		}
		for name, c := range n.entries {
			child, ok := t.nodes[c]
			if !ok {
				return fmt.Errorf("dir %d entry %q names missing inode %d", ino, name, c)
			}
			if child.parents.count(ino) == 0 {
				return fmt.Errorf("inode %d does not know parent %d", c, ino)
			}
			links[c]++
			if child.IsDir() {
				subdirs[ino]++
			}
		}
	}
	for ino, n := range t.nodes {
		switch {
		case ino == RootIno:
		case n.IsDir() && links[ino] != 1:
			return fmt.Errorf("dir %d has %d names", ino, links[ino])
		case !n.IsDir() && links[ino] != n.Nlink:
			return fmt.Errorf("inode %d nlink %d, names %d", ino, n.Nlink, links[ino])
		}
		if n.IsDir() && n.Nlink != 2+subdirs[ino] {
			return fmt.Errorf("dir %d nlink %d, subdirs %d", ino, n.Nlink, subdirs[ino])
		}
		if n.IsReg() && uint64(len(n.chunks)) != chunkCount(n.Size) && len(n.pending) == 0 {
			return fmt.Errorf("file %d size %d has %d chunks", ino, n.Size, len(n.chunks))
		}
	}
	return nil
}
