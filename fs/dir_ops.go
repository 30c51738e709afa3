package fs

import (
	"slices"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/reynfs/reynfs/fs/tree"
)

func (f *FS) OpenDir(_ <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if isView(in.NodeId) && f.views != nil && f.viewDenied(&in.InHeader) {
		return fuse.EACCES
	}
	// The epoch before the listing: a rewind in between makes the
	// handle stale, so its listing is read again, never served old.
	e := f.live.Epoch()
	ents, parent, err := f.list(in.NodeId)
	if err != nil {
		return f.status("opendir", err)
	}
	fh := f.newHandle(in.NodeId, e, 0)
	h := f.handle(fh)
	h.dir, h.parent, h.listed = ents, parent, true
	out.Fh = fh
	if !isView(in.NodeId) {
		out.OpenFlags = dirOpenFlags
	}
	return fuse.OK
}

// dirOpenFlags let the kernel keep a directory's listing in its page
// cache across opens (FOPEN_CACHE_DIR, FOPEN_KEEP_CACHE), so ls, find and
// git status read an unchanged directory without OPENDIR's READDIRPLUS
// round trips. The kernel drops the cached listing itself when the
// directory changes through the mount (it bumps the inode's version), and
// a rewind invalidates every directory it changes. The views' directories
// are not cached: the lists of generations grow behind the kernel's back.
const dirOpenFlags = fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE

// list returns a directory's entries and its parent, from the live tree
// or a view.
func (f *FS) list(ino uint64) ([]tree.Dirent, uint64, error) {
	list := f.live.Readdir
	if isView(ino) && f.views != nil {
		list = f.views.readdir
	}
	ents, parent, err := list(ino)
	if err == nil && ino == tree.RootIno {
		// The name is the views' (Lookup answers it so): a live entry of
		// that name, from a tree stored before the views had it, is not
		// listed, or the kernel would cache it and the views would vanish.
		ents = slices.DeleteFunc(ents, func(e tree.Dirent) bool { return e.Name == f.viewName })
	}
	return ents, parent, err
}

// ReadDir serves a snapshot of the directory; offset k means "after the
// k-th entry", with "." and ".." first. The snapshot is taken at opendir
// and again at each later read from offset 0 (rewinddir, which POSIX says
// shows the directory as a new opendir would): with the kernel caching
// listings (dirOpenFlags), a handle opened before a rewind must not fill
// the emptied cache with the discarded future's entries, so a handle from
// before a rewind lists again even at its first read.
func (f *FS) ReadDir(_ <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return f.readDir(in, out, false)
}

func (f *FS) ReadDirPlus(_ <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return f.readDir(in, out, true)
}

func (f *FS) readDir(in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	h := f.handle(in.Fh)
	if h == nil {
		return fuse.EBADF
	}
	if in.Offset == 0 {
		if !h.listed || h.stale() {
			ents, parent, err := f.list(h.ino)
			if err != nil {
				return f.status("readdir", err)
			}
			h.dir, h.parent = ents, parent
		}
		h.listed = false // the next read from 0 lists again
	}
	total := uint64(len(h.dir)) + 2
	for off := in.Offset; off < total; off++ {
		e := fuse.DirEntry{Mode: syscall.S_IFDIR, Off: off + 1}
		switch off {
		case 0:
			e.Name, e.Ino = ".", h.ino
		case 1:
			e.Name, e.Ino = "..", h.parent
		default:
			d := h.dir[off-2]
			e.Name, e.Ino, e.Mode = d.Name, d.Ino, d.Mode
		}
		if !plus {
			if !out.AddDirEntry(e) {
				break
			}
			continue
		}
		eo := out.AddDirLookupEntry(e)
		if eo == nil {
			break
		}
		if off < 2 {
			continue // no lookup for "." and ".."
		}
		get := f.live.Entry
		if isView(e.Ino) && f.views != nil {
			get = f.views.stat
		}
		st, err := get(e.Ino)
		if err != nil {
			*eo = fuse.EntryOut{} // gone since opendir: the kernel skips it
			continue
		}
		f.fillEntry(&st, eo)
	}
	return fuse.OK
}

func (f *FS) ReleaseDir(in *fuse.ReleaseIn) { f.dropHandle(in.Fh) }

func (f *FS) FsyncDir(_ <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if isView(in.NodeId) {
		return fuse.OK
	}
	return f.status("fsyncdir", f.live.Fsync(f.caller(&in.InHeader), in.NodeId))
}
