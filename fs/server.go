package fs

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/fs/tree"
)

// maxWrite is the largest READ and WRITE request (the kernel's max_pages
// 256 of 4 KiB pages).
const maxWrite = 1 << 20

// Options configure a mount.
type Options struct {
	Log zerolog.Logger
	// Timeout is how long the kernel may cache entries and attributes.
	// Every change goes through this mount, and a rewind invalidates what
	// it changes, so long timeouts are safe.
	Timeout time.Duration
	// FsName is shown as the mount's source in /proc/mounts (the store).
	FsName string
	// StoreDir is where statfs reads free space from.
	StoreDir string
	// History serves the read-only views under .reynfs/ (nil: none).
	History History
	// ViewsName names the views directory in the root (default ViewDir);
	// the project must not have an entry of that name (CheckViewsName).
	ViewsName string
	// PrivateHistory limits the views to the mount's owner (the daemon's
	// user) and root. Without it they are as open as the files they show:
	// a view keeps each stored file's owner, mode and ACL, so nobody reads
	// in the past what they could not read then.
	PrivateHistory bool
	// Attribute names the run and agent of a request's thread id, for the
	// journal records it causes (nil: none).
	Attribute Attributor
	Debug     bool
	// ReadOnly mounts read-only (a follower mount): the kernel answers
	// every mutation EROFS before it reaches a handler.
	ReadOnly bool
}

// FS serves a live tree over FUSE. Each handler translates the request,
// calls tree.Live and maps the error.
type FS struct {
	fuse.RawFileSystem
	live    *tree.Live
	log     zerolog.Logger
	timeout time.Duration
	server  *fuse.Server

	storeDir   string
	mountpoint string
	conn       uint64  // the kernel's FUSE connection (fusectl.go)
	syncer     *syncer // runs WriteBack's syncfs (syncfs.go)
	views      *views
	viewName   string

	mu      sync.Mutex
	handles map[uint64]*handle
	nextFh  uint64
	callers callers // who is behind a request (callers.go)
}

// Mount mounts live at mountpoint and serves it in the background. As root
// it mounts directly; otherwise through fusermount3.
func Mount(live *tree.Live, mountpoint string, opts Options) (*FS, error) {
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	f := &FS{
		RawFileSystem: fuse.NewDefaultRawFileSystem(),
		live:          live, log: opts.Log, timeout: opts.Timeout, storeDir: opts.StoreDir, mountpoint: mountpoint,
		handles: map[uint64]*handle{}, callers: callers{attribute: opts.Attribute},
	}
	f.viewName = opts.ViewsName
	if f.viewName == "" {
		f.viewName = ViewDir
	}
	if opts.History != nil {
		f.views = newViews(opts.History, opts.PrivateHistory, uint32(os.Getuid()), uint32(os.Getgid()))
	}
	mo := &fuse.MountOptions{
		FsName:            opts.FsName,
		Name:              "reynfs",
		DirectMount:       os.Geteuid() == 0,
		DirectMountStrict: os.Geteuid() == 0,
		DirectMountFlags:  syscall.MS_NOATIME | syscall.MS_NOSUID | syscall.MS_NODEV,
		MaxWrite:          maxWrite,
		// max_read after go-fuse's own (the last one counts): READs
		// small enough to splice (splice.go).
		Options:    []string{"default_permissions", fmt.Sprintf("max_read=%d", maxRead)},
		AllowOther: os.Geteuid() == 0,
		Debug:      opts.Debug,
		// POSIX ACLs as on ext4: the kernel enforces them (and turns on
		// default_permissions); the umask, default-ACL inheritance and
		// the mode an access ACL implies are ours (tree/acl.go), and
		// SETXATTR_EXT carries the kernel's "clear setgid" flag.
		EnableAcl: true,
		// EXPLICIT_INVAL_DATA: the page cache of a file survives the
		// attribute refresh after a write (AUTO_INVAL_DATA drops it when
		// it sees the new mtime, so a file just written is read from the
		// daemon again). Every write, truncate, fallocate and copy goes
		// through the kernel, which keeps its pages right itself; only a
		// swap changes content behind it, and rewind invalidates every
		// inode it changes (InvalidateInode). The views never change.
		ExplicitDataCacheControl: true,
		// CACHE_SYMLINKS: a symlink's target is read once and kept in the
		// page cache (path walks through node_modules/.bin, toolchains and
		// git's symlinks cost a READLINK each otherwise). A target never
		// changes under one inode but by a swap, which invalidates it.
		EnableSymlinkCaching: true,
		// HANDLE_KILLPRIV_V2: clearing suid/sgid and security.capability
		// on write, truncate and chown is ours (killpriv.go), so the
		// kernel stops asking GETXATTR before every write.
		ExtraCapabilities: fuse.CAP_DONT_MASK | fuse.CAP_SETXATTR_EXT | fuse.CAP_HANDLE_KILLPRIV_V2,
	}
	if opts.ReadOnly && mo.DirectMount {
		mo.DirectMountFlags |= syscall.MS_RDONLY
	} else if opts.ReadOnly {
		mo.Options = append(mo.Options, "ro") // fusermount3's
	}
	srv, err := fuse.NewServer(f, mountpoint, mo)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	f.server = srv
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		_ = srv.Unmount()
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	if err := f.watch(); err != nil {
		_ = srv.Unmount()
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	f.raiseReadahead(readaheadKB)
	return f, nil
}

// Unmount unmounts; it fails (EBUSY) while the mount is in use.
func (f *FS) Unmount() error { return f.server.Unmount() }

// Wait returns when the mount is gone, and closes the pidfds the callers
// cache held.
func (f *FS) Wait() {
	f.server.Wait()
	f.callers.forget()
}

func (f *FS) String() string { return "reynfs" }

// caller names the process behind a request for the journal: its
// command name, and the run and agent it belongs to (callers.go).
func (f *FS) caller(h *fuse.InHeader) tree.Caller {
	c := tree.Caller{Pid: h.Pid, Uid: h.Uid, Gid: h.Gid}
	if h.Pid != 0 {
		c.Comm, c.Run, c.Agent = f.callers.get(h.Pid)
	}
	return c
}

// ForgetCallers drops what is known of the processes behind requests, so
// the next request of each asks Options.Attribute again: the daemon calls
// it when a run attaches its first process.
func (f *FS) ForgetCallers() { f.callers.forget() }

func (f *FS) status(op string, err error) fuse.Status { return toStatus(&f.log, op, err) }

func (f *FS) fillAttr(st *tree.Stat, a *fuse.Attr) {
	a.Ino = st.Ino
	a.Size = st.Size
	a.Blocks = st.Blocks
	a.Mode = st.Mode
	a.Nlink = st.Nlink
	a.Uid, a.Gid = st.Uid, st.Gid
	a.Rdev = st.Rdev
	a.Blksize = 4096
	a.Atime, a.Atimensec = uint64(st.Atime/1e9), uint32(st.Atime%1e9)
	a.Mtime, a.Mtimensec = uint64(st.Mtime/1e9), uint32(st.Mtime%1e9)
	a.Ctime, a.Ctimensec = uint64(st.Ctime/1e9), uint32(st.Ctime%1e9)
}

func (f *FS) fillEntry(st *tree.Stat, out *fuse.EntryOut) {
	out.NodeId = st.Ino
	out.SetEntryTimeout(f.timeout)
	out.SetAttrTimeout(f.timeout)
	f.fillAttr(st, &out.Attr)
}

func (f *FS) fillAttrOut(st *tree.Stat, out *fuse.AttrOut) {
	out.SetTimeout(f.timeout)
	f.fillAttr(st, &out.Attr)
}
