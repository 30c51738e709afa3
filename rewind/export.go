package rewind

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
)

// ExportOptions steer an export into a directory that already holds a
// tree (the write-back at unmount).
type ExportOptions struct {
	// Base is the tree the directory holds now (nil if it is empty or
	// unknown): subtrees whose Merkle hash is unchanged are skipped, and a
	// file whose content is unchanged only gets its attributes, so an
	// unmount rewrites only what changed.
	Base *tree.Tree
	// Keep names paths changed in the directory behind reynfs's back
	// (written underneath the mount): they, and everything below them,
	// are neither overwritten nor removed (DESIGN invariant 14).
	Keep PathSet
	// KeepAttrs names directories whose mode, owner and xattrs changed
	// underneath: they keep them (their times and entries are written).
	// The root is "".
	KeepAttrs PathSet
	// Force names paths to write although Base says they are written: the
	// paths an earlier write-back failed on.
	Force PathSet
}

// PathSet is a set of relative, slash-separated paths.
type PathSet map[string]bool

// Has reports whether rel or one of its ancestors is in the set.
func (s PathSet) Has(rel string) bool {
	if len(s) == 0 {
		return false
	}
	for p := rel; ; {
		if s[p] {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// Within reports whether rel or a path below it is in the set.
func (s PathSet) Within(rel string) bool {
	for p := range s {
		if rel == "" || p == rel || strings.HasPrefix(p, rel+"/") {
			return true
		}
	}
	return false
}

// Failure is one path an export could not write.
type Failure struct {
	Path string
	Err  error
}

// ExportError lists the paths an export could not write; everything else
// was written. Its message has one line per path.
type ExportError struct{ Failures []Failure }

func (e *ExportError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d paths not written", len(e.Failures))
	for _, f := range e.Failures {
		fmt.Fprintf(&b, "\n%s: %v", f.Path, f.Err)
	}
	return b.String()
}

// Paths lists the failed paths.
func (e *ExportError) Paths() []string {
	out := make([]string, len(e.Failures))
	for i, f := range e.Failures {
		out[i] = f.Path
	}
	return out
}

// Export writes tree t into the native directory dir (created if
// missing; its last component must not be a symlink). base is the tree
// dir holds now, or nil. Both trees must be clean (Root called since
// their last change). Paths that cannot be written are reported in an
// *ExportError after everything else was written.
func Export(t, base *tree.Tree, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	top, err := OpenDir(dir)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer top.Close()
	return ExportAt(t, top, ExportOptions{Base: base})
}

// ExportAt writes tree t into the directory top is open on. Every access
// is relative to directory descriptors and never follows a symlink (see
// dirfd.go). One path that fails does not stop the others: the failures
// come back as an *ExportError.
func ExportAt(t *tree.Tree, top *os.File, o ExportOptions) error {
	e := &exporter{t: t, base: o.Base, o: o, top: top, written: map[uint64]string{}, buf: make([]byte, cas.ChunkSize)}
	var broot *tree.Node
	if o.Base != nil {
		broot = o.Base.Node(tree.RootIno)
	}
	e.dir(top, "", t.Node(tree.RootIno), broot)
	if len(e.fails) > 0 {
		sort.Slice(e.fails, func(i, j int) bool { return e.fails[i].Path < e.fails[j].Path })
		return &ExportError{Failures: e.fails}
	}
	return nil
}

type exporter struct {
	t, base *tree.Tree
	o       ExportOptions
	top     *os.File
	written map[uint64]string // inode -> relative path written in this export (hard links)
	buf     []byte
	fails   []Failure
}

func (e *exporter) fail(rel string, err error) {
	if rel == "" {
		rel = "."
	}
	e.fails = append(e.fails, Failure{Path: rel, Err: err})
}

func same(a, b *tree.Node) bool {
	if a == nil || b == nil || a.Ino != b.Ino {
		return false
	}
	ha, oka := a.Object()
	hb, okb := b.Object()
	return oka && okb && ha == hb
}

func sameType(a, b *tree.Node) bool {
	return a != nil && b != nil && a.Mode&syscall.S_IFMT == b.Mode&syscall.S_IFMT
}

// dir brings the directory d (at rel) from base to n.
func (e *exporter) dir(d *os.File, rel string, n, base *tree.Node) {
	if same(n, base) && !e.o.Force.Within(rel) {
		return
	}
	if base != nil {
		for name, bino := range base.Entries() {
			if ino, ok := n.Entries()[name]; ok && sameType(e.base.Node(bino), e.t.Node(ino)) {
				continue
			}
			crel := joinRel(rel, name)
			if err := removeAt(d, name, crel, e.o.Keep.Has); err != nil {
				e.fail(crel, fmt.Errorf("remove: %w", err))
			}
		}
		for p := range e.o.Force { // a removal that failed last time
			if pd, name := splitRel(p); pd == rel && n.Entries()[name] == 0 {
				if err := removeAt(d, name, p, e.o.Keep.Has); err != nil {
					e.fail(p, fmt.Errorf("remove: %w", err))
				}
			}
		}
	} else {
		e.clean(d, rel, n)
	}
	for name, ino := range n.Entries() {
		crel := joinRel(rel, name)
		if e.o.Keep.Has(crel) {
			continue
		}
		c := e.t.Node(ino)
		var b *tree.Node
		if base != nil && !e.o.Force[crel] {
			if bino, ok := base.Entries()[name]; ok {
				if b = e.base.Node(bino); !sameType(b, c) {
					b = nil // removed above
				}
			}
		}
		e.entry(d, name, crel, c, b)
	}
	switch {
	case e.o.Keep.Has(rel):
	case e.o.KeepAttrs[rel]:
		if err := fdTimes(int(d.Fd()), n); err != nil {
			e.fail(rel, err)
		}
	default:
		if err := e.fdAttrs(d, n); err != nil {
			e.fail(rel, err)
		}
	}
}

// clean removes what a directory holds that n does not name (an export
// into a directory of unknown content).
func (e *exporter) clean(d *os.File, rel string, n *tree.Node) {
	names, err := readNames(d)
	if err != nil {
		e.fail(rel, err)
		return
	}
	for _, name := range names {
		crel := joinRel(rel, name)
		if ino, ok := n.Entries()[name]; ok {
			st, err := lstatAt(d, name)
			if err == nil && (st.Mode&unix.S_IFMT == unix.S_IFDIR) == e.t.Node(ino).IsDir() {
				continue // a file is replaced by rename, a directory merged
			}
		}
		if err := removeAt(d, name, crel, e.o.Keep.Has); err != nil {
			e.fail(crel, fmt.Errorf("remove: %w", err))
		}
	}
}

// readNames lists directory d through a descriptor of its own, so that
// d's offset stays where it is.
func readNames(d *os.File) ([]string, error) {
	f, err := openDirAt(d, ".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

func (e *exporter) entry(d *os.File, name, rel string, n, base *tree.Node) {
	if same(n, base) && !e.o.Force.Within(rel) {
		if n.Nlink > 1 {
			e.written[n.Ino] = rel
		}
		return
	}
	if err := e.place(d, name, rel, n, base); err != nil {
		e.fail(rel, err)
		return
	}
	if n.Nlink > 1 && !n.IsDir() {
		e.written[n.Ino] = rel
	}
}

// place writes one entry; a directory recurses.
func (e *exporter) place(d *os.File, name, rel string, n, base *tree.Node) error {
	if first, ok := e.written[n.Ino]; ok && !n.IsDir() {
		fdir, fname := splitRel(first)
		fd, err := openDirBeneath(e.top, fdir)
		if err != nil {
			return fmt.Errorf("link: %w", err)
		}
		defer fd.Close()
		if err := removeAt(d, name, rel, nil); err != nil {
			return fmt.Errorf("link: %w", err)
		}
		if err := unix.Linkat(int(fd.Fd()), fname, int(d.Fd()), name, 0); err != nil {
			return fmt.Errorf("link: %w", err)
		}
		return nil
	}
	switch {
	case n.IsDir():
		sub, err := e.mkdirAt(d, name, rel)
		if err != nil {
			return err
		}
		e.dir(sub, rel, n, base)
		return sub.Close()
	case n.IsReg():
		if base == nil || !sameChunks(n.ChunkHashes(), base.ChunkHashes()) || n.Size != base.Size || !onDisk(d, name, n.Size) {
			return e.file(d, name, rel, n)
		}
	case n.IsLink():
		target, _ := n.Readlink()
		if err := removeAt(d, name, rel, nil); err != nil {
			return fmt.Errorf("symlink: %w", err)
		}
		if err := unix.Symlinkat(target, int(d.Fd()), name); err != nil {
			return fmt.Errorf("symlink: %w", err)
		}
	default:
		if err := removeAt(d, name, rel, nil); err != nil {
			return fmt.Errorf("mknod: %w", err)
		}
		if err := unix.Mknodat(int(d.Fd()), name, n.Mode, int(n.Rdev)); err != nil {
			return fmt.Errorf("mknod: %w", err)
		}
	}
	return e.attrsAt(d, name, n)
}

// mkdirAt makes sure d holds a directory name and opens it. Whatever
// else is there, a symlink above all, is removed, not followed.
func (e *exporter) mkdirAt(d *os.File, name, rel string) (*os.File, error) {
	err := unix.Mkdirat(int(d.Fd()), name, 0o700)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("mkdir: %w", err)
	}
	sub, err := openDirAt(d, name)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		if err := removeAt(d, name, rel, nil); err != nil {
			return nil, fmt.Errorf("mkdir: %w", err)
		}
		if err := unix.Mkdirat(int(d.Fd()), name, 0o700); err != nil {
			return nil, fmt.Errorf("mkdir: %w", err)
		}
		sub, err = openDirAt(d, name)
	}
	if err != nil {
		return nil, fmt.Errorf("mkdir: %w", err)
	}
	return sub, nil
}

// onDisk reports whether d holds a regular file name of the given size:
// the base tree says what the directory should hold, and this catches a
// file removed or changed under it.
func onDisk(d *os.File, name string, size uint64) bool {
	st, err := lstatAt(d, name)
	return err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && uint64(st.Size) == size
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

// file writes n's content and attributes to a new temporary file in d
// (O_TMPFILE, or unique, O_EXCL and short) and renames it over name, so a
// crash leaves either the old or the new file, and a name planted by a
// user is never opened.
func (e *exporter) file(d *os.File, name, rel string, n *tree.Node) error {
	f, tmp, err := createTemp(d)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	err = e.copyContent(f, n)
	if err == nil {
		err = f.Truncate(int64(n.Size)) // trailing holes
	}
	if err == nil {
		err = e.fdAttrs(f, n)
	}
	if err == nil && tmp == "" {
		tmp, err = nameTemp(d, f) // only now, for the rename
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(int(d.Fd()), tmp, int(d.Fd()), name)
		if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			if err = removeAt(d, name, rel, e.o.Keep.Has); err == nil {
				err = unix.Renameat(int(d.Fd()), tmp, int(d.Fd()), name)
			}
		}
	}
	if err != nil {
		if tmp != "" {
			_ = unix.Unlinkat(int(d.Fd()), tmp, 0)
		}
		return fmt.Errorf("write: %w", err)
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

func times(n *tree.Node) []unix.Timespec {
	return []unix.Timespec{unix.NsecToTimespec(n.Atime), unix.NsecToTimespec(n.Mtime)}
}

// fdAttrs sets owner, mode, xattrs and times (times last: the rest
// touches ctime only) on an open file or directory.
func (e *exporter) fdAttrs(f *os.File, n *tree.Node) error {
	fd := int(f.Fd())
	if err := unix.Fchown(fd, int(n.Uid), int(n.Gid)); err != nil && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("chown: %w", err)
	}
	if err := unix.Fchmod(fd, n.Mode&07777); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	if err := setXattrs(xattrAt{fd: fd}, n); err != nil {
		return err
	}
	return fdTimes(fd, n)
}

// fdTimes sets n's atime and mtime on an open file or directory.
func fdTimes(fd int, n *tree.Node) error {
	ts := times(n)
	// utimensat(fd, NULL, ...) is futimens: nanoseconds, on the descriptor.
	if _, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0); errno != 0 {
		return fmt.Errorf("utimens: %w", errno)
	}
	return nil
}

// attrsAt sets the attributes of name in d (a symlink, device, fifo or a
// file whose content was already there) without following it.
func (e *exporter) attrsAt(d *os.File, name string, n *tree.Node) error {
	if err := unix.Fchownat(int(d.Fd()), name, int(n.Uid), int(n.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("chown: %w", err)
	}
	if !n.IsLink() {
		if err := chmodAt(d, name, n.Mode&07777); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
	}
	if err := setXattrs(xattrAt{fd: -1, path: procPath(d, name)}, n); err != nil {
		return err
	}
	if err := unix.UtimesNanoAt(int(d.Fd()), name, times(n), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("utimens: %w", err)
	}
	return nil
}

// xattrAt reaches the xattrs of an open descriptor (fd >= 0) or, without
// following it, of path (see procPath).
type xattrAt struct {
	fd   int
	path string
}

func (x xattrAt) set(name string, v []byte) error {
	if x.fd >= 0 {
		return unix.Fsetxattr(x.fd, name, v, 0)
	}
	return unix.Lsetxattr(x.path, name, v, 0)
}

func (x xattrAt) get(name string, v []byte) (int, error) {
	if x.fd >= 0 {
		return unix.Fgetxattr(x.fd, name, v)
	}
	return unix.Lgetxattr(x.path, name, v)
}

func (x xattrAt) list(buf []byte) (int, error) {
	if x.fd >= 0 {
		return unix.Flistxattr(x.fd, buf)
	}
	return unix.Llistxattr(x.path, buf)
}

func (x xattrAt) remove(name string) error {
	if x.fd >= 0 {
		return unix.Fremovexattr(x.fd, name)
	}
	return unix.Lremovexattr(x.path, name)
}

// names lists the xattr names (none where the file system has none).
func (x xattrAt) names() []string {
	sz, err := x.list(nil)
	if err != nil || sz == 0 {
		return nil
	}
	buf := make([]byte, sz)
	if sz, err = x.list(buf); err != nil {
		return nil
	}
	var out []string
	for _, name := range strings.Split(strings.TrimRight(string(buf[:sz]), "\x00"), "\x00") {
		if name != "" {
			out = append(out, name)
		}
	}
	return out
}

func (x xattrAt) value(name string) ([]byte, error) {
	sz, err := x.get(name, nil)
	if err != nil {
		return nil, err
	}
	v := make([]byte, sz)
	sz, err = x.get(name, v)
	return v[:sz], err
}

func setXattrs(x xattrAt, n *tree.Node) error {
	want := map[string]bool{}
	for _, name := range n.XattrNames() {
		want[name] = true
		v, _ := n.Xattr(name)
		if err := x.set(name, v); err != nil {
			return fmt.Errorf("xattr %s: %w", name, err)
		}
	}
	for _, name := range x.names() {
		if !want[name] {
			_ = x.remove(name)
		}
	}
	return nil
}
