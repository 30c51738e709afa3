package fs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// InvalidateInode tells the kernel to drop inode ino's cached attributes
// and pages. It must not be called from a FUSE handler or while holding a
// lock a handler needs (the kernel may wait on a handler to answer it).
func (f *FS) InvalidateInode(ino uint64) {
	_ = f.server.InodeNotify(ino, 0, 0) // ENOENT: the kernel holds nothing to drop
}

// InvalidateEntry tells the kernel to drop the cached name in parent,
// positive or negative. The same rules as InvalidateInode apply.
func (f *FS) InvalidateEntry(parent uint64, name string) {
	_ = f.server.EntryNotify(parent, name)
}

// fuseSuperMagic is statfs's f_type of a FUSE mount.
const fuseSuperMagic = 0x65735546

// WriteBackTimeout bounds WriteBack: a syncfs that takes longer fails the
// checkpoint or rewind that asked for it instead of holding it forever.
const WriteBackTimeout = 30 * time.Second

// WriteBack has the kernel write the mount's dirty pages (from shared
// writable mappings) to the daemon, as syncfs(2) does: a checkpoint or a
// rewind then sees what processes wrote through their mappings. Linux
// does not forward syncfs itself to a FUSE server, so this only moves the
// kernel's pages; the caller journals and syncs.
//
// The syncfs runs in a child process (this binary again, see helperMain),
// never in the daemon: the kernel waits for this daemon to answer the
// WRITEs, and a thread of ours blocked there, uninterruptibly, would keep
// the process alive after kill -9 and with it the /dev/fuse descriptor
// whose closing is what aborts the connection and ends the wait. The child
// holds nothing of the daemon's (the descriptor is close-on-exec), so when
// the daemon dies the connection aborts and the child's syncfs returns. A
// child that outlives WriteBackTimeout is killed and left to the reaper.
// Never call it from a handler or under the live lock.
func (f *FS) WriteBack() error {
	cmd := exec.Command("/proc/self/exe", helperSyncfs, f.mountpoint, strconv.FormatUint(f.conn, 10))
	cmd.Dir = "/"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("write back dirty pages: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(WriteBackTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("write back dirty pages: %w: %s", err, strings.TrimSpace(stderr.String()))
		}
		return nil
	case <-timer.C:
		_ = cmd.Process.Kill() // Wait above reaps it once its syncfs returns
		return fmt.Errorf("write back dirty pages: syncfs of %s took over %v", f.mountpoint, WriteBackTimeout)
	}
}

// syncfsMain is the child of WriteBack: syncfs on the mount at point if it
// is still the FUSE connection conn (unmounted already: nothing of ours is
// cached, and the directory underneath is none of our business).
func syncfsMain(point, conn string) int {
	fd, err := unix.Open(point, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "open %s: %v\n", point, err)
		return 1
	}
	defer unix.Close(fd)
	var sfs unix.Statfs_t
	var st unix.Stat_t
	if unix.Fstatfs(fd, &sfs) != nil || sfs.Type != fuseSuperMagic || unix.Fstat(fd, &st) != nil ||
		strconv.FormatUint(connOfDev(st.Dev), 10) != conn {
		return 0
	}
	// An error here is a WRITE this daemon refused (a mapping of a file
	// whose handle a rewind made stale gets ESTALE, reported as EIO): the
	// daemon answered it already, and the pages it did take are in.
	_ = unix.Syncfs(fd)
	return 0
}
