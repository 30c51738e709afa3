package fs

import (
	"fmt"

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

// WriteBack has the kernel write the mount's dirty pages (from shared
// writable mappings) to the daemon, as syncfs(2) does: a checkpoint or a
// rewind then sees what processes wrote through their mappings. Linux
// does not forward syncfs itself to a FUSE server, so this only moves the
// kernel's pages; the caller journals and syncs. The same rules as
// InvalidateInode apply: never from a handler or under the live lock.
func (f *FS) WriteBack() error {
	fd, err := unix.Open(f.mountpoint, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("write back dirty pages: %w", err)
	}
	defer unix.Close(fd)
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil || st.Type != fuseSuperMagic {
		return nil // unmounted already: nothing of ours is cached
	}
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("write back dirty pages: %w", err)
	}
	return nil
}
