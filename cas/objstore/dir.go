package objstore

// The directory backend (file:///abs/dir). The directory may be shared
// with other users and processes, so it is treated as hostile ground:
//
//   - Everything is opened relative to one directory fd, with
//     openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) where the kernel has it
//     and else an openat walk with O_NOFOLLOW on every element; a symlink
//     planted anywhere under the root is refused, never followed.
//   - A key a/b/c is the file a/b/c; directories are made on demand and
//     never removed (an empty one is harmless and removing it would race
//     a writer about to create a file in it).
//   - A write goes to a temp file created O_EXCL in the target's
//     directory ("#tmp." and random hex: '#' never occurs in a key, so a
//     temp file can never be mistaken for an object), is fsynced, and is
//     then committed under an flock on "#lock" in the root: Put renames
//     it, PutIfAbsent link(2)s it (EEXIST: ErrPrecondition), PutIfMatch
//     re-hashes the current file and renames only if the ETag matches.
//     Delete unlinks under the same lock. The directory is fsynced before
//     a write or a delete returns. Every commit taking the lock makes the
//     conditional writes linearizable against each other and against
//     Put and Delete, across processes that share the directory.
//   - The ETag is the hex BLAKE3 of the content; Stat and Get hash the
//     file (List leaves ETag empty rather than hash every object).
//   - A temp file left by a crash is ignored by List; nothing removes it.
//   - A key cannot be both an object and the "directory" of others (a
//     and a/b): S3 allows it, a file system cannot, the remote's layout
//     never needs it, and such a write fails with a clear error.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zeebo/blake3"
	"golang.org/x/sys/unix"
)

const (
	tmpPrefix = "#tmp."
	lockName  = "#lock"
)

// noOpenat2 is set once the kernel answers openat2 with ENOSYS (before
// Linux 5.6, or a seccomp filter that refuses it): opens then walk.
var noOpenat2 atomic.Bool

type dirBackend struct {
	fd   int    // the root, O_DIRECTORY; closed by a cleanup when d is unreachable
	path string // for messages
}

// OpenDir opens the directory backend on an existing directory (an
// absolute path; the path itself may go through symlinks, nothing under
// it may).
func OpenDir(dir string) (Backend, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("file remote %q: the path must be absolute", dir)
	}
	dir = filepath.Clean(dir)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, fmt.Errorf("file remote %s: no such directory (create it first)", dir)
	case errors.Is(err, unix.ENOTDIR):
		return nil, fmt.Errorf("file remote %s: not a directory", dir)
	case err != nil:
		return nil, fmt.Errorf("file remote %s: %w", dir, err)
	}
	d := &dirBackend{fd: fd, path: dir}
	runtime.AddCleanup(d, func(fd int) { unix.Close(fd) }, fd)
	return d, nil
}

func (d *dirBackend) String() string { return "file://" + d.path }

func (d *dirBackend) Now(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// ETagOf is the directory backend's ETag of data (and the fake's).
func ETagOf(data []byte) string {
	sum := blake3.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// openBeneath opens name (a valid key or "#lock") beneath the root,
// refusing symlinks on the way and at the end.
func (d *dirBackend) openBeneath(name string, flags int, mode uint32) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(d.fd, name, &unix.OpenHow{
			Flags:   uint64(flags),
			Mode:    uint64(mode),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if !errors.Is(err, unix.ENOSYS) {
			return fd, err
		}
		noOpenat2.Store(true)
	}
	dir, base := splitKey(name)
	dfd, err := d.openDir(dir, false)
	if err != nil {
		return -1, err
	}
	defer unix.Close(dfd)
	return unix.Openat(dfd, base, flags, mode)
}

// openDir opens dir ("" is the root) beneath the root one element at a
// time with O_NOFOLLOW; with create it makes the missing elements and
// fsyncs each parent it added one to.
func (d *dirBackend) openDir(dir string, create bool) (int, error) {
	// A new open file, not a dup: a dup would share the directory's read
	// offset with d.fd and every other dup (List reads it).
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil || dir == "" {
		return fd, err
	}
	for _, elem := range strings.Split(dir, "/") {
		nfd, err := unix.Openat(fd, elem, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(fd, elem, 0o777); err == nil {
				err = unix.Fsync(fd)
			} else if errors.Is(err, unix.EEXIST) {
				err = nil
			}
			if err == nil {
				nfd, err = unix.Openat(fd, elem, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = nfd
	}
	return fd, nil
}

func splitKey(key string) (dir, base string) {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

// fsErr names op and key and maps what the file system said to this
// package's errors: a missing file (or a directory, or a file where a
// directory should be) is ErrNotExist, a symlink a refusal.
func (d *dirBackend) fsErr(op, key string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EISDIR):
		return fmt.Errorf("%s %s: %w", op, key, ErrNotExist)
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%s %s in %s: a symlink is in the way (refused)", op, key, d.path)
	}
	return fmt.Errorf("%s %s in %s: %w", op, key, d.path, err)
}

// openFile opens key's regular file for reading.
func (d *dirBackend) openFile(op, key string) (*os.File, os.FileInfo, error) {
	// O_NONBLOCK: a FIFO planted at key must not hang the open.
	fd, err := d.openBeneath(key, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, d.fsErr(op, key, err)
	}
	f := os.NewFile(uintptr(fd), key)
	st, err := f.Stat()
	if err == nil && st.IsDir() {
		err = unix.EISDIR
	} else if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("not a regular file (%v)", st.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, nil, d.fsErr(op, key, err)
	}
	return f, st, nil
}

func (d *dirBackend) Get(ctx context.Context, key string) ([]byte, Info, error) {
	defer runtime.KeepAlive(d)
	if err := begin(ctx, key); err != nil {
		return nil, Info{}, err
	}
	f, st, err := d.openFile("get", key)
	if err != nil {
		return nil, Info{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, Info{}, d.fsErr("get", key, err)
	}
	return data, Info{Key: key, Size: int64(len(data)), ETag: ETagOf(data), Mod: st.ModTime()}, nil
}

func (d *dirBackend) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	defer runtime.KeepAlive(d)
	if err := begin(ctx, key); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("get range %s: negative offset %d or length %d", key, off, n)
	}
	f, st, err := d.openFile("get range", key)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if off >= st.Size() {
		return []byte{}, nil
	}
	buf := make([]byte, min(n, st.Size()-off))
	m, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, d.fsErr("get range", key, err)
	}
	return buf[:m], nil
}

func (d *dirBackend) Stat(ctx context.Context, key string) (Info, error) {
	defer runtime.KeepAlive(d)
	if err := begin(ctx, key); err != nil {
		return Info{}, err
	}
	f, _, err := d.openFile("stat", key)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	return d.statOpen(key, f)
}

// statOpen hashes an open file; Info.Size is what was hashed.
func (d *dirBackend) statOpen(key string, f *os.File) (Info, error) {
	st, err := f.Stat()
	if err != nil {
		return Info{}, d.fsErr("stat", key, err)
	}
	h := blake3.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return Info{}, d.fsErr("stat", key, err)
	}
	return Info{Key: key, Size: n, ETag: hex.EncodeToString(h.Sum(nil)), Mod: st.ModTime()}, nil
}

func begin(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	return ctx.Err()
}

func (d *dirBackend) Put(ctx context.Context, key string, data []byte) error {
	_, err := d.write(ctx, "put", key, data, func(dfd int, tmp, base string) error {
		return unix.Renameat(dfd, tmp, dfd, base)
	})
	return err
}

func (d *dirBackend) PutIfAbsent(ctx context.Context, key string, data []byte) (Info, error) {
	return d.write(ctx, "put if absent", key, data, func(dfd int, tmp, base string) error {
		err := unix.Linkat(dfd, tmp, dfd, base, 0)
		if errors.Is(err, unix.EEXIST) {
			return ErrPrecondition
		}
		return err
	})
}

func (d *dirBackend) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (Info, error) {
	return d.write(ctx, "put if match", key, data, func(dfd int, tmp, base string) error {
		fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%w (no object)", ErrPrecondition)
		} else if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), base)
		st, err := f.Stat()
		if err == nil && !st.Mode().IsRegular() {
			err = fmt.Errorf("%w (not a regular file)", ErrPrecondition)
		}
		var cur Info
		if err == nil {
			cur, err = d.statOpen(key, f)
		}
		f.Close()
		if err != nil {
			return err
		}
		if cur.ETag != etag {
			return fmt.Errorf("%w (ETag %.12s, not %.12s)", ErrPrecondition, cur.ETag, etag)
		}
		return unix.Renameat(dfd, tmp, dfd, base)
	})
}

// write stores data in a synced temp file beside key, runs commit on it
// under the lock, removes the temp file if it is still there, and syncs
// the directory.
func (d *dirBackend) write(ctx context.Context, op, key string, data []byte, commit func(dfd int, tmp, base string) error) (Info, error) {
	defer runtime.KeepAlive(d)
	if err := begin(ctx, key); err != nil {
		return Info{}, err
	}
	dir, base := splitKey(key)
	dfd, err := d.openDir(dir, true)
	if errors.Is(err, unix.ENOTDIR) {
		return Info{}, fmt.Errorf("%s %s in %s: a part of the key is an object (file:// cannot hold both a and a/b)", op, key, d.path)
	} else if err != nil {
		return Info{}, d.fsErr(op, key, err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return Info{}, fmt.Errorf("%s %s in %s: other keys are below it (file:// cannot hold both a and a/b)", op, key, d.path)
	}
	tmp, err := writeTemp(dfd, data)
	if err != nil {
		return Info{}, fmt.Errorf("%s %s in %s: temp file: %w", op, key, d.path, err)
	}
	err = d.locked(func() error { return commit(dfd, tmp, base) })
	if rmErr := unix.Unlinkat(dfd, tmp, 0); rmErr != nil && !errors.Is(rmErr, unix.ENOENT) && err == nil {
		err = rmErr
	}
	if errors.Is(err, ErrPrecondition) {
		return Info{}, fmt.Errorf("%s %s: %w", op, key, err)
	}
	if err == nil {
		err = unix.Fsync(dfd)
	}
	if err != nil {
		return Info{}, d.fsErr(op, key, err)
	}
	return Info{Key: key, Size: int64(len(data)), ETag: ETagOf(data), Mod: time.Now()}, nil
}

// writeTemp creates a new temp file in dfd (O_EXCL, never an existing
// name), writes data and fsyncs it.
func writeTemp(dfd int, data []byte) (string, error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := tmpPrefix + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return "", err
	}
	return tmp, nil
}

// locked runs fn holding the exclusive flock on the root's lock file
// (flock locks belong to the open file, so goroutines of one process
// exclude each other too: each opens its own).
func (d *dirBackend) locked(fn func() error) error {
	fd, err := d.openBeneath(lockName, unix.O_RDWR|unix.O_CREAT, 0o666)
	if err != nil {
		return fmt.Errorf("lock file %s: %w", lockName, err)
	}
	defer unix.Close(fd)
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("flock %s: %w", lockName, err)
	}
	return fn()
}

func (d *dirBackend) Delete(ctx context.Context, key string) error {
	defer runtime.KeepAlive(d)
	if err := begin(ctx, key); err != nil {
		return err
	}
	dir, base := splitKey(key)
	dfd, err := d.openDir(dir, false)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil
	} else if err != nil {
		return d.fsErr("delete", key, err)
	}
	defer unix.Close(dfd)
	err = d.locked(func() error { return unix.Unlinkat(dfd, base, 0) })
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EISDIR):
		return nil
	case err == nil:
		err = unix.Fsync(dfd)
	}
	if err != nil {
		return d.fsErr("delete", key, err)
	}
	return nil
}

func (d *dirBackend) List(ctx context.Context, prefix string, fn func(Info) error) error {
	defer runtime.KeepAlive(d)
	if err := CheckPrefix(prefix); err != nil {
		return err
	}
	start, _ := splitKey(prefix)
	dfd, err := d.openDir(start, false)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil
	} else if err != nil {
		return d.fsErr("list", prefix, err)
	}
	return d.listDir(ctx, dfd, start, prefix, fn)
}

// listDir calls fn for the files under dfd (the directory dir, closed
// here) whose keys start with prefix, in key order: a subdirectory sorts
// as its name and '/', which is where its keys fall among its siblings.
func (d *dirBackend) listDir(ctx context.Context, dfd int, dir, prefix string, fn func(Info) error) error {
	f := os.NewFile(uintptr(dfd), dir)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return d.fsErr("list", dir, err)
	}
	// os.File's DirEntry.Info would lstat by path: stat at dfd instead.
	type entry struct {
		sortKey, name string
		st            unix.Stat_t
	}
	var todo []entry
	for _, name := range names {
		if strings.IndexByte(name, '/') >= 0 || !Valid(name) {
			continue // temp files, the lock file, anything no key can name
		}
		e := entry{name: name}
		if err := unix.Fstatat(dfd, name, &e.st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
			continue
		} else if err != nil {
			return d.fsErr("list", dir+"/"+name, err)
		}
		switch e.st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			e.sortKey = name + "/"
		case unix.S_IFREG:
			e.sortKey = name
		default:
			continue // symlinks, FIFOs, devices: never objects
		}
		todo = append(todo, e)
	}
	slices.SortFunc(todo, func(a, b entry) int { return strings.Compare(a.sortKey, b.sortKey) })
	for _, e := range todo {
		if err := ctx.Err(); err != nil {
			return err
		}
		key := e.sortKey
		if dir != "" {
			key = dir + "/" + e.sortKey
		}
		if strings.HasSuffix(key, "/") {
			if !strings.HasPrefix(key, prefix) && !strings.HasPrefix(prefix, key) {
				continue
			}
			cfd, err := unix.Openat(dfd, e.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
				continue // removed, or swapped for a symlink, since ReadDir
			} else if err != nil {
				return d.fsErr("list", key, err)
			}
			if err := d.listDir(ctx, cfd, strings.TrimSuffix(key, "/"), prefix, fn); err != nil {
				return err
			}
			continue
		}
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		mod := time.Unix(e.st.Mtim.Unix())
		if err := fn(Info{Key: key, Size: e.st.Size, Mod: mod}); err != nil {
			return err
		}
	}
	return nil
}
