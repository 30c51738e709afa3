package rewind

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
)

// Export writes tree t into the native directory dir. base is the tree dir
// holds now (nil if dir is empty or unknown): subtrees whose Merkle hash is
// unchanged are skipped, and a file whose content is unchanged only gets
// its attributes, so an unmount rewrites only what changed. Both trees
// must be clean (Root called since their last change).
func Export(t, base *tree.Tree, dir string) error {
	e := &exporter{t: t, base: base, written: map[uint64]string{}, buf: make([]byte, 1<<20)}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	var broot *tree.Node
	if base != nil {
		broot = base.Node(tree.RootIno)
	}
	return e.dir(dir, t.Node(tree.RootIno), broot)
}

type exporter struct {
	t, base *tree.Tree
	written map[uint64]string // inode -> path written in this export (hard links)
	buf     []byte
}

func same(a, b *tree.Node) bool {
	if a == nil || b == nil || a.Ino != b.Ino {
		return false
	}
	ha, oka := a.Object()
	hb, okb := b.Object()
	return oka && okb && ha == hb
}

// dir brings the native directory path from base to n; path exists.
func (e *exporter) dir(path string, n, base *tree.Node) error {
	if same(n, base) {
		return nil
	}
	if base != nil {
		for name, bino := range base.Entries() {
			if ino, ok := n.Entries()[name]; ok {
				if b := e.base.Node(bino); b != nil && b.Mode&syscall.S_IFMT == e.t.Node(ino).Mode&syscall.S_IFMT {
					continue
				}
			}
			if err := os.RemoveAll(filepath.Join(path, name)); err != nil {
				return fmt.Errorf("export: %w", err)
			}
		}
	} else if err := e.clean(path, n); err != nil {
		return err
	}
	for name, ino := range n.Entries() {
		c := e.t.Node(ino)
		var b *tree.Node
		if base != nil {
			if bino, ok := base.Entries()[name]; ok {
				b = e.base.Node(bino)
				if b != nil && b.Mode&syscall.S_IFMT != c.Mode&syscall.S_IFMT {
					b = nil // removed above
				}
			}
		}
		if err := e.entry(filepath.Join(path, name), c, b); err != nil {
			return err
		}
	}
	return e.attrs(path, n)
}

// clean removes what a directory holds that n does not name (an export
// into a directory of unknown content).
func (e *exporter) clean(path string, n *tree.Node) error {
	ents, err := os.ReadDir(path)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	for _, de := range ents {
		if ino, ok := n.Entries()[de.Name()]; ok && e.t.Node(ino).IsDir() == de.IsDir() {
			continue // a file is replaced by rename, a directory merged
		}
		if err := os.RemoveAll(filepath.Join(path, de.Name())); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	return nil
}

func (e *exporter) entry(path string, n, base *tree.Node) error {
	if same(n, base) {
		if n.Nlink > 1 {
			e.written[n.Ino] = path
		}
		return nil
	}
	if first, ok := e.written[n.Ino]; ok && !n.IsDir() {
		_ = os.Remove(path)
		if err := os.Link(first, path); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		return nil
	}
	switch {
	case n.IsDir():
		if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("export: %w", err)
		}
		if err := e.dir(path, n, base); err != nil {
			return err
		}
	case n.IsReg():
		if base == nil || !sameChunks(n.ChunkHashes(), base.ChunkHashes()) || n.Size != base.Size || !onDisk(path, n.Size) {
			if err := e.file(path, n); err != nil {
				return err
			}
		}
	case n.IsLink():
		target, _ := n.Readlink()
		_ = os.Remove(path)
		if err := os.Symlink(target, path); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	default:
		_ = os.Remove(path)
		if err := unix.Mknod(path, n.Mode, int(n.Rdev)); err != nil {
			return fmt.Errorf("export %s: %w", path, err)
		}
	}
	if n.Nlink > 1 {
		e.written[n.Ino] = path
	}
	return e.attrs(path, n)
}

// onDisk reports whether path is a regular file of the given size: the
// base tree says what the directory should hold, and this catches a file
// removed or changed under it.
func onDisk(path string, size uint64) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode().IsRegular() && uint64(fi.Size()) == size
}

func sameChunks(a, b []cas.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// file writes n's content to a temporary name beside path and renames it
// into place, so a crash leaves either the old or the new file.
func (e *exporter) file(path string, n *tree.Node) error {
	tmp := path + ".reynfs-tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	err = e.copyContent(f, n)
	if err == nil {
		err = f.Truncate(int64(n.Size)) // trailing holes
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("export %s: %w", path, err)
	}
	return nil
}

func (e *exporter) copyContent(f *os.File, n *tree.Node) error {
	for i, h := range n.ChunkHashes() {
		if h.IsZero() {
			continue // a hole stays a hole
		}
		off := uint64(i) * cas.ChunkSize
		k, err := e.t.ReadAt(n, e.buf[:min(cas.ChunkSize, n.Size-off)], off)
		if err != nil {
			return err
		}
		if _, err := f.WriteAt(e.buf[:k], int64(off)); err != nil {
			return err
		}
	}
	return nil
}

// attrs sets owner, mode, xattrs and times (times last: the rest touches ctime only).
func (e *exporter) attrs(path string, n *tree.Node) error {
	if err := os.Lchown(path, int(n.Uid), int(n.Gid)); err != nil && !errors.Is(err, syscall.EPERM) {
		return fmt.Errorf("export: %w", err)
	}
	if !n.IsLink() {
		if err := syscall.Chmod(path, n.Mode&07777); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	if err := e.xattrs(path, n); err != nil {
		return err
	}
	ts := []unix.Timespec{unix.NsecToTimespec(n.Atime), unix.NsecToTimespec(n.Mtime)}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

func (e *exporter) xattrs(path string, n *tree.Node) error {
	want := map[string]bool{}
	for _, name := range n.XattrNames() {
		want[name] = true
		v, _ := n.Xattr(name)
		if err := unix.Lsetxattr(path, name, v, 0); err != nil {
			return fmt.Errorf("export %s: xattr %s: %w", path, name, err)
		}
	}
	sz, err := unix.Llistxattr(path, nil)
	if err != nil || sz == 0 {
		return nil
	}
	buf := make([]byte, sz)
	sz, _ = unix.Llistxattr(path, buf)
	start := 0
	for i := 0; i < sz; i++ {
		if buf[i] == 0 {
			if name := string(buf[start:i]); name != "" && !want[name] {
				_ = unix.Lremovexattr(path, name)
			}
			start = i + 1
		}
	}
	return nil
}
