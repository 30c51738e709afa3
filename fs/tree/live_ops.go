package tree

import (
	"syscall"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// Stat is a node's attributes with its block count, copied under the lock.
type Stat struct {
	Attr
	Blocks uint64
}

func stat(n *Node) Stat { return Stat{Attr: n.Attr, Blocks: n.Blocks()} }

// Lookup finds name in directory parent and counts a reference to it
// (returned with Forget). Create, Mkdir, Symlink and Link count one too.
func (l *Live) Lookup(parent uint64, name string) (Stat, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n, err := l.t.Lookup(parent, name)
	if err != nil {
		return Stat{}, err
	}
	l.ref(n.Ino)
	return stat(n), nil
}

// Entry is GetAttr for an inode handed out in a directory listing
// (readdirplus): like Lookup it counts a reference.
func (l *Live) Entry(ino uint64) (Stat, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n, err := l.node(ino)
	if err != nil {
		return Stat{}, err
	}
	l.ref(ino)
	return stat(n), nil
}

// GetAttr returns inode ino's attributes.
func (l *Live) GetAttr(ino uint64) (Stat, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n, err := l.node(ino)
	if err != nil {
		return Stat{}, err
	}
	return stat(n), nil
}

// SetAttrIn is a setattr request: the Set* bits of journal plus SetSize.
type SetAttrIn struct {
	Valid        uint32
	Mode         uint32
	Uid, Gid     uint32
	Size         uint64
	Atime, Mtime int64
	// Epoch is the epoch of the handle a size change came through
	// (ftruncate), checked under the lock like a write's; NoHandle for
	// truncate(2) by path (the zero value).
	Epoch Epoch
}

// SetSize asks SetAttr to truncate (beside journal's Set* bits).
const SetSize = 1 << 16

// SetAttr changes attributes: size first (one OpData record with any
// pending writes; a truncation to 0 stays pending until the next flush),
// then the rest (one OpSetattr record).
func (l *Live) SetAttr(c Caller, ino uint64, in SetAttrIn) (Stat, error) {
	if in.Valid&SetSize != 0 && in.Size%cas.ChunkSize != 0 {
		l.warm(ino, in.Size, 1, true) // the chunk the cut falls in (live_lazy.go)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.refuseCancelled(c); err != nil {
		return Stat{}, err
	}
	n, err := l.handleNode(ino, in.Epoch)
	if err != nil {
		return Stat{}, err
	}
	now := l.now()
	if in.Valid&SetSize != 0 {
		if n.IsDir() {
			return Stat{}, ErrIsDir
		}
		if !n.IsReg() {
			return Stat{}, ErrInvalid
		}
		if err := l.admit(cas.ChunkSize, journal.AdmitShrink); err != nil {
			return Stat{}, err
		}
		if err := l.t.Truncate(n, in.Size, now); err != nil {
			return Stat{}, err
		}
		l.markPending(c, n)
		// A truncation to 0 stays pending like a write: it is almost
		// always open(2) with O_TRUNC, and the bytes that follow then
		// go into the same record at close (one record and frame
		// instead of two; 1,000 of the store-size benchmark's 2,103
		// records). Like a write it is durable after fsync, close
		// journals it, and the periodic FlushAll bounds its wait.
		if in.Size != 0 {
			if err := l.flush(c, n, journal.DataTruncate); err != nil {
				return Stat{}, err
			}
		}
	}
	if v := in.Valid &^ SetSize; v != 0 {
		if v&journal.SetMode != 0 {
			if err := l.chmodACL(c, n, in.Mode, now); err != nil {
				return Stat{}, err
			}
		}
		r := &journal.Record{Op: journal.OpSetattr, Ino: ino, Valid: v, Mode: in.Mode,
			Uid: in.Uid, Gid: in.Gid, Atime: in.Atime, Mtime: in.Mtime, Time: now}
		if err := l.commitNode(c, n, r); err != nil {
			return Stat{}, err
		}
	}
	return stat(n), nil
}

// commitNode commits a record about n, which may be an unlinked open file:
// those are changed in memory only, since no state reachable from the
// root can see them.
func (l *Live) commitNode(c Caller, n *Node, r *journal.Record) error {
	if r.Time == 0 {
		r.Time = l.now()
	}
	if l.t.nodes[n.Ino] == n {
		return l.commit(c, r, nil)
	}
	orphan := &Tree{nodes: map[uint64]*Node{n.Ino: n}}
	return orphan.Apply(r)
}

// Create makes a file, fifo, socket or device node (mknod, creat).
func (l *Live) Create(c Caller, parent uint64, name string, mode, rdev uint32) (Stat, error) {
	return l.newNode(c, &journal.Record{Op: journal.OpCreate, Parent: parent, Name: name, Mode: mode, Rdev: rdev})
}

// Mkdir makes a directory.
func (l *Live) Mkdir(c Caller, parent uint64, name string, mode uint32) (Stat, error) {
	return l.newNode(c, &journal.Record{Op: journal.OpMkdir, Parent: parent, Name: name, Mode: mode})
}

// Symlink makes a symlink to target.
func (l *Live) Symlink(c Caller, parent uint64, name, target string) (Stat, error) {
	if len(target) > 4095 {
		return Stat{}, ErrNameTooLong
	}
	return l.newNode(c, &journal.Record{Op: journal.OpSymlink, Parent: parent, Name: name, Target: target})
}

func (l *Live) newNode(c Caller, r *journal.Record) (Stat, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Check the name before spending an inode number on it.
	if _, err := l.t.Lookup(r.Parent, r.Name); err == nil {
		return Stat{}, ErrExist
	} else if err != ErrNotExist {
		return Stat{}, err
	}
	ino, err := l.allocIno()
	if err != nil {
		return Stat{}, err
	}
	r.Ino, r.Uid, r.Gid, r.Time = ino, c.Uid, c.Gid, l.now()
	var acls []*journal.Record
	if r.Op == journal.OpMkdir || r.Op == journal.OpCreate {
		p := l.t.nodes[r.Parent]
		// setgid directories pass their group on, as on ext4.
		if p.Mode&syscall.S_ISGID != 0 {
			r.Gid = p.Gid
			if r.Op == journal.OpMkdir {
				r.Mode |= syscall.S_ISGID
			}
		}
		acls = inheritACL(p, r, c.Umask)
	}
	if err := l.commit(c, r, nil); err != nil {
		return Stat{}, err
	}
	for _, a := range acls {
		if err := l.commit(c, a, nil); err != nil {
			return Stat{}, err
		}
	}
	l.ref(ino)
	return stat(l.t.nodes[ino]), nil
}

// Link gives inode ino a new name.
func (l *Live) Link(c Caller, ino, parent uint64, name string) (Stat, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.t.nodes[ino]; !ok {
		if l.orphans[ino] != nil {
			return Stat{}, ErrNotExist // linkat of an unlinked file: ENOENT, as ext4
		}
		return Stat{}, ErrStale
	}
	if err := l.commit(c, &journal.Record{Op: journal.OpLink, Ino: ino, Parent: parent, Name: name}, nil); err != nil {
		return Stat{}, err
	}
	l.ref(ino)
	return stat(l.t.nodes[ino]), nil
}

// Unlink removes a name that is not a directory.
func (l *Live) Unlink(c Caller, parent uint64, name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.commit(c, &journal.Record{Op: journal.OpUnlink, Parent: parent, Name: name}, nil)
}

// Rmdir removes an empty directory.
func (l *Live) Rmdir(c Caller, parent uint64, name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.commit(c, &journal.Record{Op: journal.OpRmdir, Parent: parent, Name: name}, nil)
}

// Rename moves parent/name to newParent/newName (flags as renameat2).
func (l *Live) Rename(c Caller, parent uint64, name string, newParent uint64, newName string, flags uint32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.commit(c, &journal.Record{Op: journal.OpRename, Parent: parent, Name: name,
		NewParent: newParent, NewName: newName, Flags: flags}, nil)
}

// Readlink returns a symlink's target.
func (l *Live) Readlink(ino uint64) (string, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n, err := l.node(ino)
	if err != nil {
		return "", err
	}
	return n.Readlink()
}

// Readdir returns a directory's entries, sorted by name.
func (l *Live) Readdir(ino uint64) ([]Dirent, uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if n := l.orphans[ino]; n != nil && l.t.nodes[ino] == nil {
		if !n.IsDir() {
			return nil, 0, ErrNotDir
		}
		return nil, ino, nil // removed, as ext4 lists it: empty
	}
	ents, err := l.t.Readdir(ino)
	return ents, l.t.Parent(ino), err
}

// GetXattr returns one extended attribute's value (a copy).
func (l *Live) GetXattr(ino uint64, name string) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n, err := l.node(ino)
	if err != nil {
		return nil, err
	}
	v, err := n.Xattr(name)
	return append([]byte(nil), v...), err
}

// ListXattr returns the extended attribute names of ino.
func (l *Live) ListXattr(ino uint64) ([]string, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n, err := l.node(ino)
	if err != nil {
		return nil, err
	}
	return n.XattrNames(), nil
}

// SetXattr sets an extended attribute (flags XATTR_CREATE / XATTR_REPLACE,
// and XattrKillSgid). The access ACL also sets the mode (live_acl.go).
func (l *Live) SetXattr(c Caller, ino uint64, name string, value []byte, flags uint32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.node(ino)
	if err != nil {
		return err
	}
	if err := xattrRoom(n, name, value); err != nil {
		return err
	}
	if name == XattrACLAccess && aclMode(n.Mode) {
		return l.setAccessACL(c, n, value, flags)
	}
	return l.commitNode(c, n, &journal.Record{Op: journal.OpSetxattr, Ino: ino, XName: name,
		XValue: append([]byte(nil), value...), Flags: flags &^ XattrKillSgid})
}

// RemoveXattr removes an extended attribute.
func (l *Live) RemoveXattr(c Caller, ino uint64, name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.node(ino)
	if err != nil {
		return err
	}
	return l.commitNode(c, n, &journal.Record{Op: journal.OpRemovexattr, Ino: ino, XName: name})
}

// Counts returns the number of inodes and of bytes waiting in write buffers.
func (l *Live) Counts() (inodes, pending int) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.t.Len(), l.pending
}

// RestoreLocked puts a copy of the stored subtree root at parent/name,
// replacing what is there, as one OpRestore record (see CountInodes). The
// objects must be in the store already. It returns the copy's top inode
// and the inode it replaced (0 if the name was free), for cache
// invalidation, and the record's seq. The caller holds the lock (Lock):
// rewind's exclusive section, which sends the invalidations only after
// unlocking.
func (l *Live) RestoreLocked(c Caller, parent uint64, name string, root cas.Hash, label string) (st Stat, old, seq uint64, err error) {
	count, err := CountInodes(l.t.store, root)
	if err != nil {
		return Stat{}, 0, 0, err
	}
	if n, err := l.t.Lookup(parent, name); err == nil {
		old = n.Ino
	}
	first := l.nextIno
	for range count {
		if _, err := l.allocIno(); err != nil {
			return Stat{}, 0, 0, err
		}
	}
	r := &journal.Record{Op: journal.OpRestore, Parent: parent, Name: name, Root: root, Ino: first, Label: label}
	if err := l.commit(c, r, nil); err != nil {
		return Stat{}, 0, 0, err
	}
	return stat(l.t.nodes[first]), old, r.Seq, nil
}
