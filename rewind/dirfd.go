package rewind

// The write-back and the import run as the mount's owner, often root, in a
// directory that other users can write (DESIGN invariant 9). Every access
// here is therefore made relative to a directory file descriptor, one name
// at a time, and never follows a symlink: a directory is opened with
// O_DIRECTORY|O_NOFOLLOW, a path below the top with openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, metadata is set with the *at calls
// and AT_SYMLINK_NOFOLLOW, and xattrs go through /proc/self/fd/<dirfd>/name
// with the l-variants (the magic link is the directory we opened; only the
// last component is looked up, and not followed). A planted symlink is an
// entry like any other: removed with unlinkat, never gone through.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenDir opens the directory path for an export or import. The last
// component must not be a symlink (the caller resolved the path it
// trusts; a link swapped in there later is refused, not followed).
func OpenDir(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openDirAt opens the directory name inside d without following a symlink.
func openDirAt(d *os.File, name string) (*os.File, error) {
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), d.Name()+"/"+name), nil
}

// openBeneath opens rel (a relative path, "" for top itself) below top
// with no symlink anywhere on the way.
func openBeneath(top *os.File, rel string, flags uint64) (int, error) {
	if rel == "" {
		rel = "."
	}
	return unix.Openat2(int(top.Fd()), rel, &unix.OpenHow{
		Flags:   flags | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// openDirBeneath opens the directory rel below top.
func openDirBeneath(top *os.File, rel string) (*os.File, error) {
	fd, err := openBeneath(top, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), top.Name()+"/"+rel), nil
}

// splitRel splits a relative path into its directory and last name.
func splitRel(rel string) (string, string) {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i], rel[i+1:]
	}
	return "", rel
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// lstatAt stats name in d without following it.
func lstatAt(d *os.File, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// procPath names entry name of the open directory d for the l*xattr calls:
// the kernel resolves the magic link to d itself and looks name up there
// without following it.
func procPath(d *os.File, name string) string {
	return fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), name)
}

// chmodAt sets the mode of name in d (not a symlink) without following
// a symlink swapped in: fchmodat2 with AT_SYMLINK_NOFOLLOW, or, on a
// kernel without it, an O_PATH descriptor checked with fstat and changed
// through its /proc/self/fd link.
func chmodAt(d *os.File, name string, mode uint32) error {
	err := unix.Fchmodat(int(d.Fd()), name, mode, unix.AT_SYMLINK_NOFOLLOW)
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
		return err
	}
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return unix.ELOOP
	}
	return unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), mode)
}

// tempName is a fresh short name for a file being written: unique, so
// it never meets a user's file, and short, so that it fits NAME_MAX
// whatever the name it will be renamed to.
func tempName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return ".reynfs-" + hex.EncodeToString(b[:]) + ".tmp"
}

// createTemp creates a new temporary file in d: unnamed (O_TMPFILE) where
// the file system can, so that a crash leaves nothing behind, else under a
// fresh name with O_EXCL. name is "" for an unnamed file.
func createTemp(d *os.File) (f *os.File, name string, err error) {
	fd, err := unix.Openat(int(d.Fd()), ".", unix.O_WRONLY|unix.O_TMPFILE|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return os.NewFile(uintptr(fd), d.Name()+"/(tmpfile)"), "", nil
	}
	for range 16 {
		name := tempName()
		fd, err := unix.Openat(int(d.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		return os.NewFile(uintptr(fd), d.Name()+"/"+name), name, nil
	}
	return nil, "", unix.EEXIST
}

// nameTemp links an unnamed temporary file into d under a fresh name (the
// /proc/self/fd link needs no capability, unlike AT_EMPTY_PATH).
func nameTemp(d *os.File, f *os.File) (string, error) {
	for range 16 {
		name := tempName()
		err := unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", f.Fd()), int(d.Fd()), name, unix.AT_SYMLINK_FOLLOW)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		return name, err
	}
	return "", unix.EEXIST
}

// removeAt removes name from d, a subtree depth first, never following a
// symlink: a directory is opened with O_NOFOLLOW, so a link swapped in
// for it is unlinked, not descended. keep, if set, names relative paths
// (rel is name's) that must stay; the directories holding them stay too.
func removeAt(d *os.File, name, rel string, keep func(string) bool) error {
	if keep != nil && keep(rel) {
		return nil
	}
	err := unix.Unlinkat(int(d.Fd()), name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	sub, err := openDirAt(d, name)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			// Swapped for a non-directory meanwhile: that unlinks.
			return unix.Unlinkat(int(d.Fd()), name, 0)
		}
		return err
	}
	names, err := sub.Readdirnames(-1)
	if err == nil {
		for _, c := range names {
			if err = removeAt(sub, c, joinRel(rel, c), keep); err != nil {
				break
			}
		}
	}
	_ = sub.Close()
	if err != nil {
		return err
	}
	err = unix.Unlinkat(int(d.Fd()), name, unix.AT_REMOVEDIR)
	if errors.Is(err, unix.ENOTEMPTY) && keep != nil {
		return nil // holds a kept path
	}
	return err
}
