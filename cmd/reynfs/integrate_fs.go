package main

// integrate runs as whoever types it, often root, in a project other
// people (and the agents) can write: a planted .claude -> /etc or
// settings.json -> /root/.bashrc must not make it read or write outside
// the project. So the project directory (the path the user typed, followed
// as typed) is opened once, and every name below it is reached one
// component at a time relative to a directory fd with O_NOFOLLOW; a
// symlink on the way is refused with one line naming it. Files are
// replaced by a new file created O_EXCL in the same directory fd and
// renamed over with renameat, which replaces a link itself, never its
// target.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// projFS is an opened project directory and the path it is shown as.
type projFS struct {
	tool string
	top  *os.File
	path string
}

func openProject(tool, dir string) (*projFS, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		// Bad input, and nothing is created: 'integrate claude --dir
		// /typo' once made /typo/.claude/settings.json, directories and all.
		return nil, fmt.Errorf("%w: integrate %s: %s: no such directory", errUsage, tool, dir)
	case errors.Is(err, unix.ENOTDIR):
		return nil, fmt.Errorf("%w: integrate %s: %s: not a directory", errUsage, tool, dir)
	case err != nil:
		return nil, fmt.Errorf("integrate %s: open %s: %w", tool, dir, err)
	}
	return &projFS{tool: tool, top: os.NewFile(uintptr(fd), dir), path: dir}, nil
}

func (p *projFS) Close() { p.top.Close() }

// refuseLink is the error for a symlink found at rel, or nil when what is
// there is not one.
func (p *projFS) refuseLink(d *os.File, name, rel string) error {
	var st unix.Stat_t
	if unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("%w: integrate %s: %s is a symlink; refusing to follow it", errUsage, p.tool, filepath.Join(p.path, rel))
	}
	return nil
}

// dir opens the directory rel (components separated by '/') below the
// project without following a symlink, creating what is missing when
// create is set. Absent and !create gives an error wrapping ErrNotExist.
func (p *projFS) dir(rel string, create bool) (*os.File, error) {
	fd, err := unix.Dup(int(p.top.Fd()))
	if err != nil {
		return nil, fmt.Errorf("integrate %s: %w", p.tool, err)
	}
	unix.CloseOnExec(fd)
	d := os.NewFile(uintptr(fd), p.path)
	done := ""
	for _, name := range strings.Split(rel, "/") {
		done = filepath.Join(done, name)
		nfd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(int(d.Fd()), name, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				nfd, err = unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		if err != nil {
			lerr := p.refuseLink(d, name, done)
			d.Close()
			if lerr != nil {
				return nil, lerr
			}
			return nil, fmt.Errorf("integrate %s: open %s: %w", p.tool, filepath.Join(p.path, done), err)
		}
		d.Close()
		d = os.NewFile(uintptr(nfd), filepath.Join(p.path, done))
	}
	return d, nil
}

// read returns the regular file name in d (nil, no error when absent) and
// its permission bits. A symlink or anything but a regular file (a FIFO
// would block the read) is refused.
func (p *projFS) read(d *os.File, name, rel string) ([]byte, os.FileMode, error) {
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, 0, nil
	}
	if err != nil {
		if lerr := p.refuseLink(d, name, rel); lerr != nil {
			return nil, 0, lerr
		}
		return nil, 0, fmt.Errorf("integrate %s: read %s: %w", p.tool, filepath.Join(p.path, rel), err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("integrate %s: %w", p.tool, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%w: integrate %s: %s is not a regular file", errUsage, p.tool, filepath.Join(p.path, rel))
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, 0, fmt.Errorf("integrate %s: read %s: %w", p.tool, filepath.Join(p.path, rel), err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, fi.Mode().Perm(), nil
}

// replace writes data to a new file beside name in d and renames it over:
// a crash leaves the old or the new file, never half of it.
func (p *projFS) replace(d *os.File, name string, data []byte, mode os.FileMode) error {
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := ".reynfs-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(int(d.Fd()), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("integrate %s: %w", p.tool, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(int(d.Fd()), tmp, int(d.Fd()), name)
	}
	if err != nil {
		unix.Unlinkat(int(d.Fd()), tmp, 0)
		return fmt.Errorf("integrate %s: %w", p.tool, err)
	}
	return nil
}

// remove unlinks name in d (a link is removed, never gone through).
func (p *projFS) remove(d *os.File, name, rel string) error {
	if err := unix.Unlinkat(int(d.Fd()), name, 0); err != nil {
		return fmt.Errorf("integrate %s: remove %s: %w", p.tool, filepath.Join(p.path, rel), err)
	}
	return nil
}
