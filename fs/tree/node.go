package tree

import (
	"errors"
	"iter"
	"sort"
	"syscall"

	"github.com/reynfs/reynfs/cas"
)

// RootIno is the inode number of the tree's root directory.
const RootIno = 1

// Errors of the tree model. fs/errno.go maps them to errno values; the tree
// itself never speaks errno.
var (
	ErrNotExist     = errors.New("no such file or directory")
	ErrExist        = errors.New("file exists")
	ErrNotEmpty     = errors.New("directory not empty")
	ErrNotDir       = errors.New("not a directory")
	ErrIsDir        = errors.New("is a directory")
	ErrInvalid      = errors.New("invalid argument")
	ErrNoAttr       = errors.New("no such extended attribute")
	ErrNameTooLong  = errors.New("file name too long")
	ErrStale        = errors.New("stale file handle")
	ErrFileTooBig   = errors.New("file too large")
	ErrNoSpace      = errors.New("no space left on device")
	ErrNotSupported = errors.New("operation not supported")
)

// MaxName is the longest name a directory entry may have, as on ext4.
const MaxName = 255

// MaxFileSize bounds file sizes (ext4 allows 16 TiB with 4 KiB blocks).
const MaxFileSize = 16 << 40

// Node is one inode of the tree. Directories hold their entries; regular
// files hold one chunk hash per ChunkSize slot plus, in a live tree, the
// chunks written but not yet journaled (pending).
//
// A million-file tree holds a million of these, so what only some nodes
// need sits behind a pointer (dh: a directory between two hashes) and the
// flags share a word: 224 bytes a node where it was 320
// (TestNodeSize keeps it so).
type Node struct {
	Attr
	xattrs  map[string][]byte
	target  string            // symlink
	chunks  []cas.Hash        // regular file, committed content
	pending map[uint64][]byte // regular file, written but not journaled
	counted int               // pending bytes Live has counted
	entries map[string]uint64 // directory
	dh      *dirHash          // directory: what its next hash reuses; nil when none

	// parents counts, per parent directory, the entries naming this node. A
	// directory has exactly one; a hard-linked file may have several.
	parents parentSet

	holes uint64 // committed chunks that are holes

	obj cas.Hash // inode-object hash, valid when !dirty
	// changed: the node itself changed since its last hash (not only a
	// node below it).
	changed bool
	dirty   bool
}

// dirHash is what a directory keeps from one hash to the next.
type dirHash struct {
	// ents caches the entries as its object entsFor lists them (sorted by
	// name, with the children's objects). While the node is clean and obj
	// is entsFor they are exactly its entries (a change of entries makes
	// the node dirty), so a graft compares two sorted lists instead of
	// looking every name up; a dirty node's hash reuses their order once
	// checked against entries. hashNode (from a directory's second hash
	// on) and Graft set it; Load does not: a directory pays its 56 bytes
	// an entry once it changes. Never changed in place.
	ents    []cas.Entry
	entsFor cas.Hash
	// dirtyKids: the children that became dirty since the last hash
	// (see markDirty).
	dirtyKids []uint64
}

// entCache returns directory n's cached entry list and the object it was
// made for (nil when none).
func (n *Node) entCache() ([]cas.Entry, cas.Hash) {
	if n.dh == nil {
		return nil, cas.Hash{}
	}
	return n.dh.ents, n.dh.entsFor
}

// setEntCache replaces n's entry cache (nil es: none) and forgets its
// dirty children: both happen when n is hashed or grafted.
func (n *Node) setEntCache(es []cas.Entry, h cas.Hash) {
	if es == nil {
		n.dh = nil
		return
	}
	n.dh = &dirHash{ents: es, entsFor: h}
}

// dirtyKids returns the children of n that became dirty since its last hash.
func (n *Node) dirtyKids() []uint64 {
	if n.dh == nil {
		return nil
	}
	return n.dh.dirtyKids
}

func (n *Node) addDirtyKid(ino uint64) {
	if n.dh == nil {
		n.dh = &dirHash{}
	}
	n.dh.dirtyKids = append(n.dh.dirtyKids, ino)
}

// Attr is a copy of a node's attributes, safe to use without the tree lock.
type Attr struct {
	Ino                 uint64
	Mode                uint32
	Uid, Gid, Rdev      uint32
	Nlink               uint32
	Size                uint64
	Atime, Mtime, Ctime int64
}

// IsDir reports whether the attributes are a directory's.
func (a *Attr) IsDir() bool { return a.Mode&syscall.S_IFMT == syscall.S_IFDIR }

// IsReg reports whether the attributes are a regular file's.
func (a *Attr) IsReg() bool { return a.Mode&syscall.S_IFMT == syscall.S_IFREG }

// IsLink reports whether the attributes are a symlink's.
func (a *Attr) IsLink() bool { return a.Mode&syscall.S_IFMT == syscall.S_IFLNK }

// Blocks is the 512-byte block count stat reports: holes are not allocated.
func (n *Node) Blocks() uint64 {
	alloc := n.Size
	if hole := n.holes * cas.ChunkSize; n.IsReg() && hole < alloc {
		alloc -= hole
	} else if n.IsReg() {
		alloc = 0
	}
	return (alloc + 511) / 512
}

// Dirent is one directory entry as readdir reports it.
type Dirent struct {
	Name string
	Ino  uint64
	Mode uint32
}

func newNode(ino uint64, mode, uid, gid, rdev uint32, t int64) *Node {
	n := &Node{
		Attr:  Attr{Ino: ino, Mode: mode, Uid: uid, Gid: gid, Rdev: rdev, Nlink: 1, Atime: t, Mtime: t, Ctime: t},
		dirty: true,
	}
	if n.IsDir() {
		n.entries = map[string]uint64{}
		n.Nlink = 2
	}
	return n
}

func (n *Node) sortedNames() []string {
	names := make([]string, 0, len(n.entries))
	for name := range n.entries {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// chunkLen is the number of bytes of a file of the given size that fall in chunk i.
func chunkLen(size, i uint64) uint64 {
	start := i * cas.ChunkSize
	if size <= start {
		return 0
	}
	return min(size-start, cas.ChunkSize)
}

// chunkCount is the number of chunk slots a file of the given size has.
func chunkCount(size uint64) uint64 {
	return (size + cas.ChunkSize - 1) / cas.ChunkSize
}

func checkName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return ErrInvalid
	case len(name) > MaxName:
		return ErrNameTooLong
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '/' || name[i] == 0 {
			return ErrInvalid
		}
	}
	return nil
}

// Object returns the node's inode-object hash as of the last Root (only
// meaningful while the node is clean).
func (n *Node) Object() (cas.Hash, bool) { return n.obj, !n.dirty }

// ChunkHashes returns the committed chunk list of a regular file.
func (n *Node) ChunkHashes() []cas.Hash { return n.chunks }

// Entries returns a directory's entries, name -> inode number (read only).
func (n *Node) Entries() map[string]uint64 { return n.entries }

// parentSet counts, per parent directory, the entries naming a node. All
// but hard-linked files have one parent, so that one is kept inline and a
// map exists only for the second and later parents: a map per node cost
// about 175 bytes, a sixth of the daemon's heap at 100k files.
type parentSet struct {
	first  uint64         // a parent, valid when firstN > 0
	firstN int            // entries of first naming the node
	more   map[uint64]int // other parents (hard links), nil when none
}

// add counts one more entry of directory p naming the node.
func (s *parentSet) add(p uint64) {
	switch {
	case s.firstN > 0 && s.first == p:
		s.firstN++
	case s.firstN == 0:
		s.first, s.firstN = p, 1
	default:
		if s.more == nil {
			s.more = map[uint64]int{}
		}
		s.more[p]++
	}
}

// remove drops one entry of directory p naming the node; it reports
// whether the node has no parent left.
func (s *parentSet) remove(p uint64) bool {
	if s.firstN > 0 && s.first == p {
		if s.firstN--; s.firstN == 0 {
			for q, n := range s.more {
				s.first, s.firstN = q, n
				delete(s.more, q)
				break
			}
		}
	} else if n, ok := s.more[p]; ok {
		if n <= 1 {
			delete(s.more, p)
		} else {
			s.more[p] = n - 1
		}
	}
	if len(s.more) == 0 {
		s.more = nil
	}
	return s.firstN == 0
}

// count is the number of entries of directory p naming the node.
func (s *parentSet) count(p uint64) int {
	if s.firstN > 0 && s.first == p {
		return s.firstN
	}
	return s.more[p]
}

// len is the number of distinct parent directories.
func (s *parentSet) len() int {
	if s.firstN == 0 {
		return 0
	}
	return 1 + len(s.more)
}

// all yields each parent directory and its entry count.
func (s *parentSet) all() iter.Seq2[uint64, int] {
	return func(yield func(uint64, int) bool) {
		if s.firstN == 0 {
			return
		}
		if !yield(s.first, s.firstN) {
			return
		}
		for p, n := range s.more {
			if !yield(p, n) {
				return
			}
		}
	}
}
