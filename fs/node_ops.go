package fs

import (
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// Node ids are inode numbers: they are never reused (the allocator only
// grows), so the kernel's node id and our inode number can be one.

func (f *FS) Lookup(_ <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if f.views != nil && (isView(h.NodeId) || h.NodeId == tree.RootIno && name == f.viewName) {
		if f.viewDenied(h) {
			return fuse.EACCES
		}
		parent := h.NodeId
		if !isView(parent) {
			st, err := f.views.stat(viewRoot)
			return f.viewEntry(st, err, out)
		}
		st, err := f.views.lookup(parent, name)
		return f.viewEntry(st, err, out)
	}
	st, err := f.live.Lookup(h.NodeId, name)
	if errors.Is(err, tree.ErrNotExist) {
		// A negative entry the kernel may cache: every create goes
		// through this mount, so the kernel drops it when it is wrong.
		out.NodeId = 0
		out.SetEntryTimeout(f.timeout)
		return fuse.OK
	}
	if err != nil {
		return f.status("lookup", err)
	}
	f.fillEntry(&st, out)
	return fuse.OK
}

func (f *FS) Forget(nodeid, nlookup uint64) {
	if !isView(nodeid) {
		f.live.Forget(nodeid, nlookup)
	}
}

func (f *FS) GetAttr(_ <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	get := f.live.GetAttr
	if isView(in.NodeId) && f.views != nil {
		if f.viewDenied(&in.InHeader) {
			return fuse.EACCES
		}
		get = f.views.stat
	}
	st, err := get(in.NodeId)
	if err != nil {
		return f.status("getattr", err)
	}
	f.fillAttrOut(&st, out)
	return fuse.OK
}

func (f *FS) SetAttr(_ <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if isView(in.NodeId) {
		return fuse.EROFS
	}
	var sa tree.SetAttrIn
	if m, ok := in.GetMode(); ok {
		sa.Valid |= journal.SetMode
		sa.Mode = m
	}
	if u, ok := in.GetUID(); ok {
		sa.Valid |= journal.SetUid
		sa.Uid = u
	}
	if g, ok := in.GetGID(); ok {
		sa.Valid |= journal.SetGid
		sa.Gid = g
	}
	if t, ok := in.GetATime(); ok {
		sa.Valid |= journal.SetAtime
		sa.Atime = t.UnixNano()
	}
	if t, ok := in.GetMTime(); ok {
		sa.Valid |= journal.SetMtime
		sa.Mtime = t.UnixNano()
	}
	if s, ok := in.GetSize(); ok {
		if hd := f.handle(in.Fh); in.Valid&fuse.FATTR_FH != 0 && hd != nil {
			sa.Epoch = hd.epoch // ftruncate: checked under the live lock
		}
		sa.Valid |= tree.SetSize
		sa.Size = s
	}
	c := f.caller(&in.InHeader)
	if err := f.killPrivSetAttr(c, in, &sa); err != nil {
		return f.status("setattr", err)
	}
	st, err := f.live.SetAttr(c, in.NodeId, sa)
	if err != nil {
		return f.status("setattr", err)
	}
	f.fillAttrOut(&st, out)
	return fuse.OK
}

func (f *FS) entry(op string, st tree.Stat, err error, out *fuse.EntryOut) fuse.Status {
	if err != nil {
		return f.status(op, err)
	}
	f.fillEntry(&st, out)
	return fuse.OK
}

func (f *FS) Mknod(_ <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if f.readOnly(in.NodeId, name) {
		return fuse.EROFS
	}
	// With FUSE_DONT_MASK the umask is ours to apply (or a default ACL's
	// to replace): see tree/acl.go.
	c := f.caller(&in.InHeader)
	c.Umask = in.Umask
	st, err := f.live.Create(c, in.NodeId, name, in.Mode, in.Rdev)
	return f.entry("mknod", st, err, out)
}

func (f *FS) Mkdir(_ <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	if f.readOnly(in.NodeId, name) {
		return fuse.EROFS
	}
	c := f.caller(&in.InHeader)
	c.Umask = in.Umask
	st, err := f.live.Mkdir(c, in.NodeId, name, in.Mode)
	return f.entry("mkdir", st, err, out)
}

func (f *FS) Symlink(_ <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	if f.readOnly(h.NodeId, name) {
		return fuse.EROFS
	}
	st, err := f.live.Symlink(f.caller(h), h.NodeId, name, target)
	return f.entry("symlink", st, err, out)
}

func (f *FS) Link(_ <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if f.readOnly(in.NodeId, name) || isView(in.Oldnodeid) {
		return fuse.EROFS
	}
	st, err := f.live.Link(f.caller(&in.InHeader), in.Oldnodeid, in.NodeId, name)
	return f.entry("link", st, err, out)
}

func (f *FS) Unlink(_ <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if f.readOnly(h.NodeId, name) {
		return fuse.EROFS
	}
	return f.status("unlink", f.live.Unlink(f.caller(h), h.NodeId, name))
}

func (f *FS) Rmdir(_ <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if f.readOnly(h.NodeId, name) {
		return fuse.EROFS
	}
	return f.status("rmdir", f.live.Rmdir(f.caller(h), h.NodeId, name))
}

func (f *FS) Rename(_ <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if f.readOnly(in.NodeId, oldName) || f.readOnly(in.Newdir, newName) {
		return fuse.EROFS
	}
	err := f.live.Rename(f.caller(&in.InHeader), in.NodeId, oldName, in.Newdir, newName, in.Flags)
	return f.status("rename", err)
}

func (f *FS) Readlink(_ <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	get := f.live.Readlink
	if isView(h.NodeId) && f.views != nil {
		if f.viewDenied(h) {
			return nil, fuse.EACCES
		}
		get = f.views.readlink // an absolute target is shown as stored
	}
	target, err := get(h.NodeId)
	if err != nil {
		return nil, f.status("readlink", err)
	}
	return []byte(target), fuse.OK
}

func (f *FS) GetXAttr(_ <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	// Every write(2) asks for security.capability first: this is answered
	// from memory, never from the store.
	get := f.live.GetXattr
	if isView(h.NodeId) && f.views != nil {
		if f.viewDenied(h) {
			return 0, fuse.EACCES
		}
		get = f.views.xattr
	}
	v, err := get(h.NodeId, attr)
	if err != nil {
		return 0, f.status("getxattr", err)
	}
	if len(dest) == 0 {
		return uint32(len(v)), fuse.OK
	}
	if len(dest) < len(v) {
		return uint32(len(v)), fuse.ERANGE
	}
	return uint32(copy(dest, v)), fuse.OK
}

func (f *FS) ListXAttr(_ <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	list := f.live.ListXattr
	if isView(h.NodeId) && f.views != nil {
		if f.viewDenied(h) {
			return 0, fuse.EACCES
		}
		list = f.views.xattrNames
	}
	names, err := list(h.NodeId)
	if err != nil {
		return 0, f.status("listxattr", err)
	}
	size := 0
	for _, n := range names {
		size += len(n) + 1
	}
	if len(dest) == 0 {
		return uint32(size), fuse.OK
	}
	if len(dest) < size {
		return uint32(size), fuse.ERANGE
	}
	b := dest[:0]
	for _, n := range names {
		b = append(append(b, n...), 0)
	}
	return uint32(size), fuse.OK
}

func (f *FS) SetXAttr(_ <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	if isView(in.NodeId) {
		return fuse.EROFS
	}
	if len(attr) > 255 {
		return fuse.Status(syscall.ERANGE)
	}
	if len(data) > 64<<10 {
		return fuse.Status(syscall.E2BIG)
	}
	flags := in.Flags
	if in.SetXAttrFlags&fuse.SETXATTR_ACL_KILL_SGID != 0 {
		flags |= tree.XattrKillSgid
	}
	err := f.live.SetXattr(f.caller(&in.InHeader), in.NodeId, attr, data, flags)
	return f.status("setxattr", err)
}

func (f *FS) RemoveXAttr(_ <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	if isView(h.NodeId) {
		return fuse.EROFS
	}
	return f.status("removexattr", f.live.RemoveXattr(f.caller(h), h.NodeId, attr))
}

func (f *FS) StatFs(_ <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	// Space is the store's file system's, less the reserve that writers
	// cannot use (journal.Usable): df then shows 0 when writes get
	// ENOSPC. Inodes are ours.
	var s syscall.Statfs_t
	if err := syscall.Statfs(f.storeDir, &s); err != nil {
		return f.status("statfs", err)
	}
	inodes, _ := f.live.Counts()
	bsize := uint64(max(s.Bsize, 1))
	usable := journal.Usable(s.Bavail*bsize, s.Blocks*bsize) / bsize
	out.Blocks, out.Bfree, out.Bavail = s.Blocks, s.Bfree, min(s.Bavail, usable)
	out.Bsize, out.Frsize = uint32(s.Bsize), uint32(s.Frsize)
	out.Files = uint64(inodes) + s.Ffree
	out.Ffree = s.Ffree
	out.NameLen = tree.MaxName
	return fuse.OK
}

// readOnly reports whether a name may not be created or removed: anything
// inside a view, and the view directory's own name in the root.
func (f *FS) readOnly(parent uint64, name string) bool {
	return isView(parent) || parent == tree.RootIno && name == f.viewName
}

// viewDenied reports whether a request for a view must be refused: with
// private history only the mount's owner and root reach the views. The
// top directories' modes (0500) make the kernel refuse the rest first;
// this check also covers names the kernel still has cached.
func (f *FS) viewDenied(h *fuse.InHeader) bool {
	v := f.views
	return v != nil && v.private && h.Uid != 0 && h.Uid != v.owner
}
