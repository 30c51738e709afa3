package tree

import (
	"errors"
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
type Node struct {
	Attr
	xattrs  map[string][]byte
	target  string            // symlink
	chunks  []cas.Hash        // regular file, committed content
	pending map[uint64][]byte // regular file, written but not journaled
	counted int               // pending bytes Live has counted
	entries map[string]uint64 // directory
	// ents caches a directory's entries as its object entsFor lists them
	// (sorted by name, with the children's objects). While the node is
	// clean and obj is entsFor they are exactly its entries (a change of
	// entries makes the node dirty), so a graft compares two sorted lists
	// instead of looking every name up; a dirty node's hash reuses their
	// order once checked against entries. hashNode and Graft set it (Load
	// does not: a directory pays its 56 bytes an entry once it changes);
	// never changed in place.
	ents    []cas.Entry
	entsFor cas.Hash
	// changed: the node itself changed since its last hash (not only a
	// node below it); dirtyKids: the children that became dirty since
	// then (see markDirty).
	changed   bool
	dirtyKids []uint64

	// parents counts, per parent directory, the entries naming this node. A
	// directory has exactly one; a hard-linked file may have several.
	parents map[uint64]int

	holes uint64 // committed chunks that are holes

	obj   cas.Hash // inode-object hash, valid when !dirty
	dirty bool
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
		Attr:    Attr{Ino: ino, Mode: mode, Uid: uid, Gid: gid, Rdev: rdev, Nlink: 1, Atime: t, Mtime: t, Ctime: t},
		parents: map[uint64]int{},
		dirty:   true,
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
