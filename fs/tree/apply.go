package tree

import (
	"fmt"
	"syscall"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// Apply applies one file-system record to the tree. It checks the record
// against the tree first and changes nothing when it returns an error, so
// the live file system can validate an operation by applying it before it
// journals it, and replay runs the very same code.
func (t *Tree) Apply(r *journal.Record) error {
	switch r.Op {
	case journal.OpCreate, journal.OpMkdir, journal.OpSymlink:
		return t.applyNew(r)
	case journal.OpLink:
		return t.applyLink(r)
	case journal.OpUnlink, journal.OpRmdir:
		return t.applyRemove(r)
	case journal.OpRename:
		return t.applyRename(r)
	case journal.OpData:
		return t.applyData(r)
	case journal.OpSetattr:
		return t.applySetattr(r)
	case journal.OpSetxattr, journal.OpRemovexattr:
		return t.applyXattr(r)
	case journal.OpRestore:
		return t.applyRestore(r)
	case journal.OpGeneration, journal.OpReset, journal.OpAgentState:
		return nil // control records do not change the tree
	}
	return fmt.Errorf("apply %v: %w", r.Op, ErrInvalid)
}

// dir returns the directory ino, or an error.
func (t *Tree) dir(ino uint64) (*Node, error) {
	d, ok := t.nodes[ino]
	if !ok {
		return nil, ErrStale
	}
	if !d.IsDir() {
		return nil, ErrNotDir
	}
	return d, nil
}

func (t *Tree) applyNew(r *journal.Record) error {
	d, err := t.dir(r.Parent)
	if err != nil {
		return err
	}
	if err := checkName(r.Name); err != nil {
		return err
	}
	if _, ok := d.entries[r.Name]; ok {
		return ErrExist
	}
	if _, ok := t.nodes[r.Ino]; ok || r.Ino == 0 {
		return fmt.Errorf("new inode %d: %w", r.Ino, ErrInvalid)
	}
	mode := r.Mode
	switch r.Op {
	case journal.OpMkdir:
		mode = mode&^syscall.S_IFMT | syscall.S_IFDIR
	case journal.OpSymlink:
		mode = syscall.S_IFLNK | 0o777
	default:
		if mode&syscall.S_IFMT == 0 {
			mode |= syscall.S_IFREG
		}
		if ft := mode & syscall.S_IFMT; ft == syscall.S_IFDIR || ft == syscall.S_IFLNK {
			return ErrInvalid
		}
	}
	n := newNode(r.Ino, mode, r.Uid, r.Gid, r.Rdev, r.Time)
	if r.Op == journal.OpSymlink {
		n.target = r.Target
		n.Size = uint64(len(r.Target))
	}
	t.nodes[n.Ino] = n
	t.attach(d, r.Name, n, r.Time)
	return nil
}

func (t *Tree) applyLink(r *journal.Record) error {
	d, err := t.dir(r.Parent)
	if err != nil {
		return err
	}
	n, ok := t.nodes[r.Ino]
	if !ok {
		return ErrNotExist
	}
	if n.IsDir() {
		return fmt.Errorf("link a directory: %w", ErrInvalid)
	}
	if err := checkName(r.Name); err != nil {
		return err
	}
	if _, ok := d.entries[r.Name]; ok {
		return ErrExist
	}
	n.Nlink++
	n.Ctime = r.Time
	t.attach(d, r.Name, n, r.Time)
	return nil
}

func (t *Tree) applyRemove(r *journal.Record) error {
	d, err := t.dir(r.Parent)
	if err != nil {
		return err
	}
	ino, ok := d.entries[r.Name]
	if !ok {
		return ErrNotExist
	}
	n := t.nodes[ino]
	if r.Op == journal.OpRmdir {
		if !n.IsDir() {
			return ErrNotDir
		}
		if len(n.entries) > 0 {
			return ErrNotEmpty
		}
	} else if n.IsDir() {
		return ErrIsDir
	}
	t.removeEntry(d, r.Name, n, r.Time)
	return nil
}

// applyRename implements rename(2) and renameat2(2) with RENAME_NOREPLACE
// and RENAME_EXCHANGE, with the checks and errors ext4 gives.
func (t *Tree) applyRename(r *journal.Record) error {
	src, err := t.dir(r.Parent)
	if err != nil {
		return err
	}
	dst, err := t.dir(r.NewParent)
	if err != nil {
		return err
	}
	if r.Flags&^(journal.RenameNoreplace|journal.RenameExchange) != 0 ||
		r.Flags == journal.RenameNoreplace|journal.RenameExchange {
		return ErrInvalid
	}
	if err := checkName(r.NewName); err != nil {
		return err
	}
	ino, ok := src.entries[r.Name]
	if !ok {
		return ErrNotExist
	}
	n := t.nodes[ino]
	oino, exists := dst.entries[r.NewName]
	var other *Node
	if exists {
		other = t.nodes[oino]
	}
	switch {
	case r.Flags&journal.RenameExchange != 0 && !exists:
		return ErrNotExist
	case r.Flags&journal.RenameNoreplace != 0 && exists:
		return ErrExist
	}
	// A directory may not move below itself.
	if n.IsDir() && t.isAncestor(n.Ino, dst.Ino) {
		return ErrInvalid
	}
	if r.Flags&journal.RenameExchange != 0 {
		if other.IsDir() && t.isAncestor(other.Ino, src.Ino) {
			return ErrInvalid
		}
		if n == other {
			return nil
		}
		t.detach(src, r.Name, n, r.Time)
		t.detach(dst, r.NewName, other, r.Time)
		t.attach(dst, r.NewName, n, r.Time)
		t.attach(src, r.Name, other, r.Time)
		n.Ctime, other.Ctime = r.Time, r.Time
		return nil
	}
	if exists {
		if other == n {
			return nil // two names of one inode: rename does nothing
		}
		switch {
		case n.IsDir() && !other.IsDir():
			return ErrNotDir
		case !n.IsDir() && other.IsDir():
			return ErrIsDir
		case other.IsDir() && len(other.entries) > 0:
			return ErrNotEmpty
		}
		t.removeEntry(dst, r.NewName, other, r.Time)
	}
	t.detach(src, r.Name, n, r.Time)
	t.attach(dst, r.NewName, n, r.Time)
	n.Ctime = r.Time
	return nil
}

// isAncestor reports whether directory a is d or one of d's ancestors.
func (t *Tree) isAncestor(a, d uint64) bool {
	for {
		if d == a {
			return true
		}
		if d == RootIno {
			return false
		}
		n, ok := t.nodes[d]
		if !ok {
			return false
		}
		d = n.parent()
	}
}

// parent returns a directory's parent (a directory has exactly one).
func (n *Node) parent() uint64 {
	for p := range n.parents.all() {
		return p
	}
	return RootIno
}

// removeEntry unlinks name from d and drops n when no name is left.
func (t *Tree) removeEntry(d *Node, name string, n *Node, now int64) {
	t.detach(d, name, n, now)
	if n.IsDir() {
		n.Nlink = 0
	} else {
		n.Nlink--
	}
	n.Ctime = now
	if n.Nlink == 0 {
		delete(t.nodes, n.Ino)
		if t.OnDrop != nil {
			t.OnDrop(n)
		}
		return
	}
	t.markDirty(n)
}

// attach adds the entry name -> n to d; n's own link count is the caller's.
func (t *Tree) attach(d *Node, name string, n *Node, now int64) {
	d.entries[name] = n.Ino
	n.parents.add(d.Ino)
	if n.IsDir() {
		d.Nlink++
	}
	d.Mtime, d.Ctime = now, now
	t.markDirty(d)
	t.markDirty(n)
}

// detach removes the entry name -> n from d; n's own link count is the caller's.
func (t *Tree) detach(d *Node, name string, n *Node, now int64) {
	delete(d.entries, name)
	n.parents.remove(d.Ino)
	if n.IsDir() {
		d.Nlink--
	}
	d.Mtime, d.Ctime = now, now
	t.markDirty(d)
}

func (t *Tree) applyData(r *journal.Record) error {
	n, ok := t.nodes[r.Ino]
	if !ok {
		return ErrStale
	}
	if !n.IsReg() {
		return ErrInvalid
	}
	if r.Size > MaxFileSize {
		return ErrFileTooBig
	}
	count := chunkCount(r.Size)
	for _, c := range r.Chunks {
		if c.Index >= count {
			return fmt.Errorf("data: chunk %d past size %d: %w", c.Index, r.Size, ErrInvalid)
		}
	}
	if k := len(r.Holes); k > 0 && r.Holes[k-1].Start+r.Holes[k-1].Count > count {
		return fmt.Errorf("data: holes past size %d: %w", r.Size, ErrInvalid)
	}
	n.setContent(r)
	t.markDirty(n)
	return nil
}

// setContent applies an OpData record's content change to n.
func (n *Node) setContent(r *journal.Record) {
	count := chunkCount(r.Size)
	if uint64(len(n.chunks)) > count {
		for _, h := range n.chunks[count:] {
			if h.IsZero() {
				n.holes--
			}
		}
		clear(n.chunks[count:])
		n.chunks = n.chunks[:count]
	} else {
		n.holes += count - uint64(len(n.chunks))
		n.chunks = append(n.chunks, make([]cas.Hash, count-uint64(len(n.chunks)))...)
	}
	n.punch(r.Holes)
	for _, c := range r.Chunks {
		if n.chunks[c.Index].IsZero() {
			n.holes--
		}
		if c.Hash.IsZero() {
			n.holes++
		}
		n.chunks[c.Index] = c.Hash
	}
	n.Size = r.Size
	n.Mtime, n.Ctime = r.Mtime, r.Mtime
}

func (t *Tree) applySetattr(r *journal.Record) error {
	n, ok := t.nodes[r.Ino]
	if !ok {
		return ErrStale
	}
	if r.Valid&journal.SetMode != 0 {
		n.Mode = n.Mode&syscall.S_IFMT | r.Mode&^syscall.S_IFMT
	}
	if r.Valid&journal.SetUid != 0 {
		n.Uid = r.Uid
	}
	if r.Valid&journal.SetGid != 0 {
		n.Gid = r.Gid
	}
	if r.Valid&journal.SetAtime != 0 {
		n.Atime = r.Atime
	}
	if r.Valid&journal.SetMtime != 0 {
		n.Mtime = r.Mtime
	}
	n.Ctime = r.Time
	t.markDirty(n)
	return nil
}

func (t *Tree) applyXattr(r *journal.Record) error {
	n, ok := t.nodes[r.Ino]
	if !ok {
		return ErrStale
	}
	_, has := n.xattrs[r.XName]
	if r.Op == journal.OpRemovexattr {
		if !has {
			return ErrNoAttr
		}
		delete(n.xattrs, r.XName)
	} else {
		switch {
		case r.Flags&xattrCreate != 0 && has:
			return ErrExist
		case r.Flags&xattrReplace != 0 && !has:
			return ErrNoAttr
		case r.XName == "":
			return ErrInvalid
		}
		if n.xattrs == nil {
			n.xattrs = map[string][]byte{}
		}
		n.xattrs[r.XName] = append([]byte(nil), r.XValue...)
	}
	n.Ctime = r.Time
	t.markDirty(n)
	return nil
}

// setxattr(2) flags.
const (
	xattrCreate  = 1
	xattrReplace = 2
)
