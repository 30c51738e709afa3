package cas

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidInode: an inode object's bytes or fields break the format's rules.
var ErrInvalidInode = errors.New("invalid inode object")

// File type bits of Inode.Mode, as in stat(2). They are spelled out here so
// that the object format does not depend on the build platform's syscall
// package.
const (
	ModeType    = 0o170000 // S_IFMT
	ModeSocket  = 0o140000 // S_IFSOCK
	ModeSymlink = 0o120000 // S_IFLNK
	ModeRegular = 0o100000 // S_IFREG
	ModeBlock   = 0o060000 // S_IFBLK
	ModeDir     = 0o040000 // S_IFDIR
	ModeChar    = 0o020000 // S_IFCHR
	ModeFifo    = 0o010000 // S_IFIFO
)

// maxMode is the largest Mode: type bits plus setuid, setgid, sticky and rwx.
const maxMode = 0o177777

// Xattr is one extended attribute.
type Xattr struct {
	Name  string
	Value []byte
}

// Entry is one directory entry: the child's name, its inode number and the
// hash of the child's inode object. Two entries with the same Ino are hard
// links to one inode (and then name the same object).
type Entry struct {
	Name   string
	Ino    uint64
	Object Hash
}

// Inode is one file-system inode as stored: one object per inode, named by
// the hash of its encoding. Directories name their children's objects, so a
// directory's hash covers its whole subtree (a Merkle tree). The link count
// is not stored; it is the number of entries that carry the Ino.
type Inode struct {
	Ino                 uint64
	Mode                uint32 // permission bits and the ModeType bits
	Uid, Gid, Rdev      uint32
	Size                uint64  // regular: byte size; symlink: len(Target); others: 0
	Atime, Mtime, Ctime int64   // unix nanoseconds
	Xattrs              []Xattr // sorted by Name, unique
	Target              string  // symlink only
	Chunks              []Hash  // regular file only: ChunkCount(Size) hashes; Zero is a hole
	Entries             []Entry // directory only: sorted by Name, unique
}

// Type returns the ModeType bits of the mode.
func (in *Inode) Type() uint32 { return in.Mode & ModeType }

// IsDir reports whether the inode is a directory.
func (in *Inode) IsDir() bool { return in.Type() == ModeDir }

// IsRegular reports whether the inode is a regular file.
func (in *Inode) IsRegular() bool { return in.Type() == ModeRegular }

// IsSymlink reports whether the inode is a symbolic link.
func (in *Inode) IsSymlink() bool { return in.Type() == ModeSymlink }

// Hash returns the name of the inode's object: Sum(EncodeInode(in)).
func (in *Inode) Hash() Hash { return Sum(EncodeInode(in)) }

// ChunkCount returns how many chunks a regular file of size bytes has.
func ChunkCount(size uint64) uint64 {
	return size/ChunkSize + min(size%ChunkSize, 1)
}

// Validate checks the rules DecodeInode enforces, so that a writer can refuse
// an inode before storing an object nobody could read back.
func (in *Inode) Validate() error {
	if err := in.validate(); err != nil {
		return fmt.Errorf("validate inode %d: %w", in.Ino, err)
	}
	return nil
}

func (in *Inode) validate() error {
	if in.Ino == 0 {
		return invalidf("inode number 0")
	}
	if in.Mode > maxMode {
		return invalidf("mode %#o has bits above 0o177777", in.Mode)
	}
	for i, x := range in.Xattrs {
		if x.Name == "" || strings.IndexByte(x.Name, 0) >= 0 {
			return invalidf("xattr name %q", x.Name)
		}
		if i > 0 && in.Xattrs[i-1].Name >= x.Name {
			return invalidf("xattrs not sorted and unique at %q", x.Name)
		}
	}
	t := in.Type()
	if t != ModeSymlink && in.Target != "" {
		return invalidf("target on a non-symlink")
	}
	if t != ModeRegular && len(in.Chunks) > 0 {
		return invalidf("chunks on a non-regular file")
	}
	if t != ModeDir && len(in.Entries) > 0 {
		return invalidf("entries on a non-directory")
	}
	switch t {
	case ModeRegular:
		if want := ChunkCount(in.Size); uint64(len(in.Chunks)) != want {
			return invalidf("%d chunks for size %d, want %d", len(in.Chunks), in.Size, want)
		}
	case ModeSymlink:
		if in.Target == "" || strings.IndexByte(in.Target, 0) >= 0 {
			return invalidf("symlink target %q", in.Target)
		}
		if in.Size != uint64(len(in.Target)) {
			return invalidf("symlink size %d, target is %d bytes", in.Size, len(in.Target))
		}
	case ModeDir:
		if in.Size != 0 {
			return invalidf("directory size %d", in.Size)
		}
		for i, e := range in.Entries {
			if err := validName(e.Name); err != nil {
				return err
			}
			if i > 0 && in.Entries[i-1].Name >= e.Name {
				return invalidf("entries not sorted and unique at %q", e.Name)
			}
			if e.Ino == 0 || e.Object.IsZero() {
				return invalidf("entry %q has no inode number or object", e.Name)
			}
		}
	case ModeFifo, ModeSocket, ModeChar, ModeBlock:
		if in.Size != 0 {
			return invalidf("size %d on a special file", in.Size)
		}
	default:
		return invalidf("file type %#o", t)
	}
	return nil
}

// validName accepts what a Linux directory entry may be called.
func validName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 255 ||
		strings.ContainsAny(name, "/\x00") {
		return invalidf("entry name %q", name)
	}
	return nil
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInode, fmt.Sprintf(format, args...))
}
