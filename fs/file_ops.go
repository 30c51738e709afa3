package fs

import (
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/reynfs/reynfs/fs/tree"
)

// handle is an open file or directory. epoch is the live tree's swap count
// when it was opened: after a rewind the handle belongs to the discarded
// future and every write through it fails with ESTALE. The live tree
// compares it under its lock (tree.Epoch); stale here only spares a flush.
type handle struct {
	f         *FS
	ino       uint64
	epoch     tree.Epoch
	appending bool
	dir       []tree.Dirent // directory snapshot (dir_ops.go ReadDir)
	parent    uint64
	listed    bool // dir is fresh from opendir, not yet read from 0
}

func (h *handle) stale() bool { return h.epoch != h.f.live.Epoch() }

// newHandle registers a handle of ino opened in epoch e: for a file, the
// epoch live.Open returned with it, never one read afterwards.
func (f *FS) newHandle(ino uint64, e tree.Epoch, flags uint32) uint64 {
	h := &handle{f: f, ino: ino, epoch: e, appending: flags&syscall.O_APPEND != 0}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextFh++
	f.handles[f.nextFh] = h
	return f.nextFh
}

func (f *FS) handle(fh uint64) *handle {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.handles[fh]
}

func (f *FS) dropHandle(fh uint64) *handle {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.handles[fh]
	delete(f.handles, fh)
	return h
}

// openFlags keeps the kernel's page cache across opens: every write goes
// through this mount, and a rewind invalidates what it changes.
const openFlags = fuse.FOPEN_KEEP_CACHE

// openFlagsFor adds FOPEN_NOFLUSH to a read-only handle: its close(2)
// then costs no FLUSH round trip. Nothing can be buffered through such a
// handle (no write, and no shared writable mapping of it), and data that
// other handles buffered is journaled by their own close, fsync or the
// periodic flush, so the FLUSH would only journal someone else's writes
// early. git add, builds and greps open most files read-only: this takes
// one request in ten off git add. Without a writeback cache the kernel
// skips the whole flush for such a handle (fuse_flush).
func openFlagsFor(flags uint32) uint32 {
	if flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		return openFlags | fuse.FOPEN_NOFLUSH
	}
	return openFlags
}

func (f *FS) Create(_ <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if f.readOnly(in.NodeId, name) {
		return fuse.EROFS
	}
	c := f.caller(&in.InHeader)
	c.Umask = in.Umask // ours to apply: see Mknod
	st, err := f.live.Create(c, in.NodeId, name, in.Mode|syscall.S_IFREG, 0)
	if errors.Is(err, tree.ErrExist) && in.Flags&syscall.O_EXCL == 0 {
		st, err = f.live.Lookup(in.NodeId, name) // lost a race with another create
		if err == nil && st.IsDir() {
			f.live.Forget(st.Ino, 1)
			err = tree.ErrIsDir
		}
	}
	if err != nil {
		return f.status("create", err)
	}
	_, e, err := f.live.Open(st.Ino)
	if err != nil {
		f.live.Forget(st.Ino, 1) // the reply carries no entry
		return f.status("create", err)
	}
	f.fillEntry(&st, &out.EntryOut)
	out.Fh = f.newHandle(st.Ino, e, in.Flags)
	out.OpenFlags = openFlagsFor(in.Flags)
	return fuse.OK
}

func (f *FS) Open(_ <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if isView(in.NodeId) {
		if f.viewDenied(&in.InHeader) {
			return fuse.EACCES
		}
		if in.Flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
			return fuse.EROFS
		}
		out.Fh = f.newHandle(in.NodeId, f.live.Epoch(), 0)
		out.OpenFlags = openFlagsFor(syscall.O_RDONLY)
		if in.NodeId == viewTimelne {
			out.OpenFlags = fuse.FOPEN_DIRECT_IO // it grows with every generation
		}
		return fuse.OK
	}
	a, e, err := f.live.Open(in.NodeId)
	if err != nil {
		return f.status("open", err)
	}
	if a.IsDir() {
		f.live.Release(in.NodeId)
		return fuse.EISDIR
	}
	out.Fh = f.newHandle(in.NodeId, e, in.Flags)
	out.OpenFlags = openFlagsFor(in.Flags)
	return fuse.OK
}

// Read replies with the chunks themselves where it can: chunks the store
// verified before are spliced from their segment files (splice.go), the
// rest go to the kernel by writev(2) straight from the cache or buf
// (fuse.ReadResultVector); only data still in a write buffer is copied,
// into buf.
func (f *FS) Read(_ <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	size := min(len(buf), int(in.Size))
	if isView(in.NodeId) && f.views != nil {
		n, err := f.views.read(in.NodeId, buf[:size], in.Offset)
		if err != nil {
			return nil, f.status("read", err)
		}
		return vectorResult([][]byte{buf[:n]}), fuse.OK
	}
	if canSplice(size) {
		rr, replied, err := f.readSpliced(in, size, buf)
		if err != nil {
			return nil, f.status("read", err)
		}
		if replied {
			return rr, fuse.OK
		}
	}
	vecs, _, err := f.live.ReadVec(in.NodeId, in.Offset, size, buf)
	if err != nil {
		return nil, f.status("read", err)
	}
	return vectorResult(vecs), fuse.OK
}

func (f *FS) Write(_ <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	h := f.handle(in.Fh)
	if h == nil {
		return 0, fuse.Status(syscall.ESTALE)
	}
	c := f.caller(&in.InHeader)
	if err := f.killPriv(&in.InHeader, c, h.epoch, in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0); err != nil {
		return 0, f.status("write", err)
	}
	n, err := f.live.WriteAt(c, in.NodeId, h.epoch, data, in.Offset, h.appending)
	if err != nil {
		return 0, f.status("write", err)
	}
	return uint32(n), fuse.OK
}

func (f *FS) Flush(_ <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	if isView(in.NodeId) {
		return fuse.OK
	}
	if h := f.handle(in.Fh); h == nil || h.stale() {
		return fuse.OK // nothing of a discarded future is journaled
	}
	err := f.live.Flush(f.caller(&in.InHeader), in.NodeId)
	if errors.Is(err, tree.ErrStale) {
		return fuse.OK
	}
	return f.status("flush", err)
}

func (f *FS) Fsync(_ <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if isView(in.NodeId) {
		return fuse.OK
	}
	if h := f.handle(in.Fh); h != nil && h.stale() {
		return fuse.Status(syscall.ESTALE)
	}
	return f.status("fsync", f.live.Fsync(f.caller(&in.InHeader), in.NodeId))
}

func (f *FS) Release(_ <-chan struct{}, in *fuse.ReleaseIn) {
	if h := f.dropHandle(in.Fh); h != nil && !isView(h.ino) {
		f.live.Release(h.ino)
	}
}

func (f *FS) Fallocate(_ <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	if isView(in.NodeId) {
		return fuse.EROFS
	}
	h := f.handle(in.Fh)
	if h == nil {
		return fuse.Status(syscall.ESTALE)
	}
	err := f.live.Fallocate(f.caller(&in.InHeader), in.NodeId, h.epoch, in.Mode, in.Offset, in.Length)
	return f.status("fallocate", err)
}

func (f *FS) CopyFileRange(_ <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	if isView(in.NodeId) || isView(in.NodeIdOut) {
		// Views are not in the live tree: EXDEV makes the kernel fall
		// back to a read/write copy (fuse_copy_file_range), as across
		// file systems, so cp and cat > from history get every byte.
		return 0, fuse.Status(syscall.EXDEV)
	}
	h := f.handle(in.FhOut)
	if h == nil {
		return 0, fuse.Status(syscall.ESTALE)
	}
	n, err := f.live.CopyRange(f.caller(&in.InHeader), in.NodeId, in.OffIn, in.NodeIdOut, h.epoch, in.OffOut, in.Len)
	if err != nil {
		return 0, f.status("copy_file_range", err)
	}
	return uint32(n), fuse.OK
}
