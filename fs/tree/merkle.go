package tree

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"syscall"

	"github.com/reynfs/reynfs/cas"
)

// ErrPending: a Merkle root was asked for while a file still holds written
// data that is not journaled yet; flush first.
var ErrPending = errors.New("tree has unjournaled data")

// markDirty invalidates n's object hash and, through the parent links, the
// hashes of every directory above it. A dirty node's parents are always
// dirty, so the walk stops at the first node already dirty: the cost of a
// change is the depth of the node, once per node between two roots.
//
// n itself changed (its attributes or its entries); the directories above
// only have a child whose object changed, which each notes in dirtyKids:
// hashNode then re-hashes just those children of a directory whose own
// entries did not change, instead of visiting every entry.
func (t *Tree) markDirty(n *Node) {
	if n != nil {
		n.changed = true
	}
	t.propagateDirty(n)
}

func (t *Tree) propagateDirty(n *Node) {
	for n != nil && !n.dirty {
		n.dirty = true
		if n.parents.len() != 1 {
			for p := range n.parents.all() {
				if pn := t.nodes[p]; pn != nil {
					pn.addDirtyKid(n.Ino)
					t.propagateDirty(pn)
				}
			}
			return
		}
		p := t.nodes[n.parent()]
		if p != nil {
			p.addDirtyKid(n.Ino)
		}
		n = p
	}
}

// Root returns the Merkle root of the tree — the hash of the root
// directory's inode object — and the objects made since the last call,
// which the caller must store before it records the root anywhere. Only
// nodes changed since the last call are re-encoded; each new object names
// the node's previous one as its Base (cas.Blob).
func (t *Tree) Root() (cas.Hash, []cas.Blob, error) {
	var s sink
	h, err := t.hashNode(t.nodes[RootIno], &s)
	return h, s.blobs, err
}

// RootTo is Root for a tree whose new objects are too many to hold at
// once: the first import of a million files made a million inode objects
// (about 270 MiB with their slice) before one was stored, the daemon's
// peak. It hands them to put in batches of about batch objects, every
// object after the objects it names, and returns the root once the last
// batch is put. put must store them (committed: the record naming the
// root, synced later, makes them durable, as an import's chunks are).
//
// When put fails the tree holds nodes marked clean whose objects may not
// be stored: the caller must drop the tree, as a failed import does.
func (t *Tree) RootTo(put func([]cas.Blob) error, batch int) (cas.Hash, error) {
	s := sink{put: put, batch: max(batch, 1)}
	h, err := t.hashNode(t.nodes[RootIno], &s)
	if err == nil {
		err = s.flush()
	}
	return h, err
}

// sink collects the objects a Root makes; with put set it hands them
// over in batches as they come.
type sink struct {
	blobs []cas.Blob
	put   func([]cas.Blob) error
	batch int
}

func (s *sink) add(b cas.Blob) error {
	s.blobs = append(s.blobs, b)
	if s.put != nil && len(s.blobs) >= s.batch {
		return s.flush()
	}
	return nil
}

func (s *sink) flush() error {
	if len(s.blobs) == 0 {
		return nil
	}
	err := s.put(s.blobs)
	clear(s.blobs)
	s.blobs = s.blobs[:0]
	return err
}

func (t *Tree) hashNode(n *Node, blobs *sink) (cas.Hash, error) {
	if !n.dirty {
		return n.obj, nil
	}
	if len(n.pending) > 0 {
		return cas.Hash{}, fmt.Errorf("root: inode %d: %w", n.Ino, ErrPending)
	}
	in := n.inode()
	if n.IsDir() {
		var err error
		if in.Entries, err = t.hashEntries(n, blobs); err != nil {
			return cas.Hash{}, err
		}
	}
	data := cas.EncodeInode(in)
	// The object this one replaces is the store's best delta base.
	prev := n.obj
	hashed := !prev.IsZero() // not its first hash
	n.obj = cas.Sum(data)
	n.dirty, n.changed = false, false
	// The entry cache speeds up the next hash of a directory whose child
	// changed; a new directory (all of them after an import) gets it only
	// from its second hash on, as Load leaves it: at a million files the
	// caches of directories that never change again were 56 MiB.
	if n.IsDir() && hashed {
		n.setEntCache(in.Entries, n.obj)
	} else {
		n.setEntCache(nil, cas.Hash{})
	}
	return n.obj, blobs.add(cas.Blob{Hash: n.obj, Data: data, Base: prev})
}

// hashEntries returns dirty directory n's entries with their children's
// objects, hashing the children that changed. When n itself did not change
// (only something below it did) and it holds the entry list of its last
// object, that list is copied and only the children noted in dirtyKids are
// hashed: a file rewritten in a directory of 10,000 costs one child, not a
// lookup of every entry.
func (t *Tree) hashEntries(n *Node, blobs *sink) ([]cas.Entry, error) {
	if ents, for_ := n.entCache(); !n.changed && ents != nil && for_ == n.obj && len(ents) == len(n.entries) {
		es := slices.Clone(ents)
		for _, ino := range n.dirtyKids() {
			c := t.nodes[ino]
			if c == nil {
				continue // gone (then n's entries changed too)
			}
			h, err := t.hashNode(c, blobs) // maybe hashed already, through another link

			if err != nil {
				return nil, err
			}
			for i := range es {
				if es[i].Ino == ino {
					es[i].Object = h
				}
			}
		}
		return es, nil
	}
	es := n.entryNames()
	for i := range es {
		c := t.nodes[es[i].Ino]
		h, err := t.hashNode(c, blobs)
		if err != nil {
			return nil, err
		}
		es[i].Object = h
	}
	return es, nil
}

// entryNames returns directory n's entries in name order, without their
// objects. A directory whose child changed keeps its names: the order of
// the last hash is reused when every name in it is still there (and no
// other), instead of sorting the names again. At 100 entries to a
// directory that sort was a quarter of a checkpoint's Merkle root.
func (n *Node) entryNames() []cas.Entry {
	es := make([]cas.Entry, len(n.entries))
	if ents, _ := n.entCache(); len(ents) == len(n.entries) {
		ok := true
		for i := range ents {
			name := ents[i].Name
			ino, found := n.entries[name]
			if !found {
				ok = false
				break
			}
			es[i] = cas.Entry{Name: name, Ino: ino}
		}
		if ok {
			return es
		}
	}
	for i, name := range n.sortedNames() {
		es[i] = cas.Entry{Name: name, Ino: n.entries[name]}
	}
	return es
}

// inode returns n's inode object without directory entries.
func (n *Node) inode() *cas.Inode {
	in := &cas.Inode{
		Ino: n.Ino, Mode: n.Mode, Uid: n.Uid, Gid: n.Gid, Rdev: n.Rdev, Size: n.Size,
		Atime: n.Atime, Mtime: n.Mtime, Ctime: n.Ctime, Target: n.target,
	}
	if n.IsReg() {
		in.Chunks = append([]cas.Hash(nil), n.chunks...)
	}
	for _, name := range sortedKeys(n.xattrs) {
		in.Xattrs = append(in.Xattrs, cas.Xattr{Name: name, Value: n.xattrs[name]})
	}
	return in
}

// Load builds the tree named by a Merkle root from the store. Shared
// subtrees are decoded once; hard links (entries with one inode number)
// become one node.
func Load(store cas.Store, root cas.Hash) (*Tree, error) {
	return LoadFrom(store, root, nil)
}

// LoadFrom is Load that copies the subtrees base already holds (same
// inode-object hash, so the same content) instead of reading them from the
// store: a rewind between nearby states costs what differs, not the tree.
// base must be clean (Root called since its last change) and is not
// modified.
func LoadFrom(store cas.Store, root cas.Hash, base *Tree) (*Tree, error) {
	t := &Tree{store: store, nodes: map[uint64]*Node{}}
	in, err := getInode(store, root)
	if err != nil {
		return nil, fmt.Errorf("load root: %w", err)
	}
	if in.Mode&syscall.S_IFMT != syscall.S_IFDIR || in.Ino != RootIno {
		return nil, fmt.Errorf("load root %s: not a root directory: %w", root.Short(), cas.ErrCorrupt)
	}
	n := fromInode(in, root)
	t.nodes[n.Ino] = n
	if err := t.loadEntries(store, n, in.Entries, base); err != nil {
		return nil, err
	}
	if base == nil {
		return t, t.Check()
	}
	return t, nil
}

// loadEntries links the entries of directory n, loading (or copying from
// base) the inodes not seen yet.
func (t *Tree) loadEntries(store cas.Store, n *Node, entries []cas.Entry, base *Tree) error {
	for _, e := range entries {
		c, seen := t.nodes[e.Ino]
		switch {
		case seen:
			if c.IsDir() || c.obj != e.Object {
				return fmt.Errorf("load %q: inode %d linked twice with different objects: %w", e.Name, e.Ino, cas.ErrCorrupt)
			}
		case base.reusable(e.Ino, e.Object) != nil:
			b := base.nodes[e.Ino]
			c = copyNode(b)
			t.nodes[c.Ino] = c
			if c.IsDir() {
				if err := t.loadEntries(store, c, base.entryList(b), base); err != nil {
					return err
				}
			}
		default:
			cin, err := getInode(store, e.Object)
			if err != nil {
				return fmt.Errorf("load %q: %w", e.Name, err)
			}
			if cin.Ino != e.Ino {
				return fmt.Errorf("load %q: entry says inode %d, object %d: %w", e.Name, e.Ino, cin.Ino, cas.ErrCorrupt)
			}
			c = fromInode(cin, e.Object)
			t.nodes[c.Ino] = c
			if err := t.loadEntries(store, c, cin.Entries, base); err != nil {
				return err
			}
		}
		n.entries[e.Name] = e.Ino
		c.parents.add(n.Ino)
		if c.IsDir() {
			n.Nlink++
		} else if seen {
			c.Nlink++
		}
	}
	return nil
}

// reusable returns base's node ino if its inode object is h (nil base:
// none).
func (t *Tree) reusable(ino uint64, h cas.Hash) *Node {
	if t == nil {
		return nil
	}
	b := t.nodes[ino]
	if b == nil || b.dirty || b.obj != h || b.pending != nil {
		return nil
	}
	return b
}

// entryList returns directory b's entries as its inode object lists them
// (b is clean). The list may be b's cache: do not change it.
func (t *Tree) entryList(b *Node) []cas.Entry {
	if ents, for_ := b.entCache(); !b.dirty && ents != nil && for_ == b.obj && len(ents) == len(b.entries) {
		return ents
	}
	out := make([]cas.Entry, 0, len(b.entries))
	for _, name := range b.sortedNames() {
		ino := b.entries[name]
		out = append(out, cas.Entry{Name: name, Ino: ino, Object: t.nodes[ino].obj})
	}
	return out
}

// copyNode copies a clean node without its links (loadEntries adds them).
func copyNode(b *Node) *Node {
	n := newNode(b.Ino, b.Mode, b.Uid, b.Gid, b.Rdev, 0)
	n.Size, n.Atime, n.Mtime, n.Ctime = b.Size, b.Atime, b.Mtime, b.Ctime
	n.target, n.holes = b.target, b.holes
	n.chunks = slices.Clone(b.chunks)
	n.xattrs = maps.Clone(b.xattrs) // values are replaced, never changed in place
	n.obj, n.dirty = b.obj, false
	n.setEntCache(b.entCache())
	return n
}

func getInode(store cas.Store, h cas.Hash) (*cas.Inode, error) {
	b, err := store.Get(h)
	if err != nil {
		return nil, err
	}
	return cas.DecodeInode(b)
}

func fromInode(in *cas.Inode, h cas.Hash) *Node {
	n := newNode(in.Ino, in.Mode, in.Uid, in.Gid, in.Rdev, 0)
	n.Size, n.Atime, n.Mtime, n.Ctime = in.Size, in.Atime, in.Mtime, in.Ctime
	n.target = in.Target
	if n.IsReg() {
		n.chunks = append([]cas.Hash(nil), in.Chunks...)
		for _, c := range n.chunks {
			if c.IsZero() {
				n.holes++
			}
		}
	}
	if len(in.Xattrs) > 0 {
		n.xattrs = make(map[string][]byte, len(in.Xattrs))
		for _, x := range in.Xattrs {
			n.xattrs[x.Name] = x.Value
		}
	}
	n.obj, n.dirty = h, false
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
