package fs

import (
	"slices"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/reynfs/reynfs/fs/tree"
)

func (f *FS) OpenDir(_ <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	list := f.live.Readdir
	if isView(in.NodeId) && f.views != nil {
		if f.viewDenied(&in.InHeader) {
			return fuse.EACCES
		}
		list = f.views.readdir
	}
	ents, parent, err := list(in.NodeId)
	if err != nil {
		return f.status("opendir", err)
	}
	if in.NodeId == tree.RootIno {
		// The name is the views' (Lookup answers it so): a live entry of
		// that name, from a tree stored before the views had it, is not
		// listed, or the kernel would cache it and the views would vanish.
		ents = slices.DeleteFunc(ents, func(e tree.Dirent) bool { return e.Name == f.viewName })
	}
	fh := f.newHandle(in.NodeId, 0)
	h := f.handle(fh)
	h.dir, h.parent = ents, parent
	out.Fh = fh
	return fuse.OK
}

// ReadDir serves the snapshot taken at opendir; offset k means "after the
// k-th entry", with "." and ".." first.
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
