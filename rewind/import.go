package rewind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// Importer builds a tree from a native directory. With a base tree (what
// the directory held when reynfs last wrote it), an entry whose type, mode,
// owner, size and mtime are unchanged keeps its inode number, times and
// content without being read, like git's stat check.
//
// The import runs as the mount's owner, often root, over a directory other
// users may write while it runs: every entry is reached relative to its
// directory's descriptor through an O_PATH|O_NOFOLLOW descriptor that
// pins its inode; what is read is opened from that descriptor and checked
// with fstat, so a symlink swapped in is never followed (DESIGN invariant
// 9; see dirfd.go).
type Importer struct {
	Store cas.Store
	Base  *tree.Tree
	// Pin names paths whose native state is not what Base says because a
	// write-back failed there: the import keeps Base's version of them
	// (or leaves them out if Base has none) instead of reading the
	// directory, so a failed write-back is not mistaken for a change.
	Pin PathSet
	// Alloc hands out inode numbers for new entries.
	Alloc func() (uint64, error)
	// Progress, if set, is called after each file with running totals.
	Progress func(files int, bytes int64)
	// Ctx, if set, cancels the import (Ctrl-C during a long first mount):
	// Import then returns its error and nothing has been committed.
	Ctx context.Context
	// Since, if set (Unix ns), is read in full even when its stat matches
	// Base for a file whose ctime is at or after it: a same-size write
	// with its mtime put back (UnderneathSince).
	Since int64

	t     *tree.Tree
	links map[[2]uint64]uint64 // native (dev, ino) -> our ino, for hard links
	files int
	bytes int64
	buf   []byte
}

// Import reads dir into a new tree; dir's last component must not be a
// symlink.
func (im *Importer) Import(dir string) (*tree.Tree, error) {
	top, err := OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer top.Close()
	return im.ImportAt(top)
}

// ImportAt reads the directory top is open on into a new tree.
func (im *Importer) ImportAt(top *os.File) (*tree.Tree, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(top.Fd()), &st); err != nil {
		return nil, fmt.Errorf("import %s: %w", top.Name(), err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, fmt.Errorf("import %s: %w", top.Name(), tree.ErrNotDir)
	}
	im.t = tree.New(im.Store, st.Mode, st.Uid, st.Gid, ctime(&st))
	im.links = map[[2]uint64]uint64{}
	im.buf = make([]byte, cas.ChunkSize)
	var base *tree.Node
	if im.Base != nil {
		base = im.Base.Node(tree.RootIno)
	}
	if err := im.dir(top, "", tree.RootIno, base); err != nil {
		return nil, err
	}
	if err := im.xattrs(xattrAt{fd: int(top.Fd())}, ".", tree.RootIno); err != nil {
		return nil, err
	}
	if err := im.finish(".", tree.RootIno, &st, base); err != nil {
		return nil, err
	}
	return im.t, im.t.Check()
}

func (im *Importer) apply(r *journal.Record, path string) error {
	if err := im.t.Apply(r); err != nil {
		return fmt.Errorf("import %s: %w", path, err)
	}
	return nil
}

// dir imports the entries of the native directory d (at rel) into
// directory ino.
func (im *Importer) dir(d *os.File, rel string, ino uint64, base *tree.Node) error {
	names, err := readNames(d)
	if err != nil {
		return fmt.Errorf("import %s: %w", d.Name(), err)
	}
	seen := map[string]bool{}
	for _, name := range names {
		seen[name] = true
	}
	// Pinned entries the directory lacks (a create that failed).
	for p := range im.Pin {
		if pd, name := splitRel(p); pd == rel && !seen[name] && base != nil && base.Entries()[name] != 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		crel := joinRel(rel, name)
		if im.Pin[crel] {
			if err := im.pinned(ino, name, crel, base); err != nil {
				return err
			}
			continue
		}
		if err := im.entry(d, crel, ino, name, base); err != nil {
			return err
		}
	}
	return nil
}

// pinned copies base's entry name (if any) instead of reading the directory.
func (im *Importer) pinned(parent uint64, name, rel string, baseDir *tree.Node) error {
	if baseDir == nil || baseDir.Entries()[name] == 0 {
		return nil
	}
	return im.copyBase(parent, name, rel, im.Base.Node(baseDir.Entries()[name]))
}

func (im *Importer) copyBase(parent uint64, name, rel string, b *tree.Node) error {
	if n := im.t.Node(b.Ino); n != nil && !b.IsDir() {
		return im.apply(&journal.Record{Op: journal.OpLink, Parent: parent, Name: name, Ino: b.Ino, Time: n.Ctime}, rel)
	}
	ino := b.Ino
	if im.t.Node(ino) != nil {
		var err error
		if ino, err = im.Alloc(); err != nil {
			return err
		}
	}
	r := &journal.Record{Op: journal.OpCreate, Parent: parent, Name: name, Ino: ino, Mode: b.Mode, Uid: b.Uid, Gid: b.Gid, Rdev: b.Rdev, Time: b.Ctime}
	switch {
	case b.IsDir():
		r.Op = journal.OpMkdir
	case b.IsLink():
		r.Op = journal.OpSymlink
		r.Target, _ = b.Readlink()
	}
	if err := im.apply(r, rel); err != nil {
		return err
	}
	if b.IsReg() {
		d := &journal.Record{Op: journal.OpData, Ino: ino, Size: b.Size, Mtime: b.Mtime}
		for i, h := range b.ChunkHashes() {
			d.Chunks = append(d.Chunks, journal.Chunk{Index: uint64(i), Hash: h})
		}
		if err := im.apply(d, rel); err != nil {
			return err
		}
	}
	if b.IsDir() {
		names := make([]string, 0, len(b.Entries()))
		for n := range b.Entries() {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if err := im.copyBase(ino, n, joinRel(rel, n), im.Base.Node(b.Entries()[n])); err != nil {
				return err
			}
		}
	}
	for _, x := range b.XattrNames() {
		v, _ := b.Xattr(x)
		if err := im.apply(&journal.Record{Op: journal.OpSetxattr, Ino: ino, XName: x, XValue: v}, rel); err != nil {
			return err
		}
	}
	return im.apply(&journal.Record{Op: journal.OpSetattr, Ino: ino, Valid: journal.SetAtime | journal.SetMtime,
		Atime: b.Atime, Mtime: b.Mtime, Time: b.Ctime}, rel)
}

func (im *Importer) entry(d *os.File, rel string, parent uint64, name string, baseDir *tree.Node) error {
	if im.Ctx != nil {
		if err := im.Ctx.Err(); err != nil {
			return fmt.Errorf("import %s: %w", rel, err)
		}
	}
	// An O_PATH|O_NOFOLLOW descriptor pins the inode the name holds now,
	// a symlink included; its fstat, the directory or file opened from it
	// and its link target all describe that one inode, whatever is
	// renamed over the name meanwhile.
	pfd, err := unix.Openat(int(d.Fd()), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // removed while we walked
		}
		return fmt.Errorf("import %s: %w", rel, err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return fmt.Errorf("import %s: %w", rel, err)
	}
	key := [2]uint64{st.Dev, st.Ino}
	if ino, ok := im.links[key]; ok && st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		// The link keeps the inode's ctime: finish set it already.
		return im.apply(&journal.Record{Op: journal.OpLink, Parent: parent, Name: name, Ino: ino, Time: im.t.Node(ino).Ctime}, rel)
	}
	var base *tree.Node
	if baseDir != nil {
		if bino, ok := baseDir.Entries()[name]; ok {
			if b := im.Base.Node(bino); b != nil && b.Mode&syscall.S_IFMT == st.Mode&syscall.S_IFMT && im.t.Node(bino) == nil {
				base = b
			}
		}
	}
	// Open what must be read, from the pinned inode.
	var f *os.File
	var target string
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		var fd int
		if fd, err = unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			f = os.NewFile(uintptr(fd), rel)
		}
	case syscall.S_IFREG:
		if !unchanged(base, &st) || (im.Since > 0 && ctime(&st) >= im.Since) {
			var fd int
			fd, err = unix.Open(fmt.Sprintf("/proc/self/fd/%d", pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
			if err == nil {
				f = os.NewFile(uintptr(fd), rel)
			}
		}
	case syscall.S_IFLNK:
		target, err = readlinkAt(pfd, st.Size)
	}
	if err != nil {
		return fmt.Errorf("import %s: %w", rel, err)
	}
	if f != nil {
		defer f.Close()
		var fst unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &fst); err != nil {
			return fmt.Errorf("import %s: %w", rel, err)
		}
		if fst.Dev != st.Dev || fst.Ino != st.Ino {
			return fmt.Errorf("import %s: opened another file than the one stat'ed", rel)
		}
	}
	var ino uint64
	if base != nil {
		ino = base.Ino
	} else if ino, err = im.Alloc(); err != nil {
		return err
	}
	r := &journal.Record{Parent: parent, Name: name, Ino: ino, Mode: st.Mode, Uid: st.Uid, Gid: st.Gid, Time: ctime(&st)}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		r.Op = journal.OpMkdir
	case syscall.S_IFLNK:
		r.Op, r.Target = journal.OpSymlink, target
	default:
		r.Op, r.Rdev = journal.OpCreate, uint32(st.Rdev)
	}
	if err := im.apply(r, rel); err != nil {
		return err
	}
	im.links[key] = ino
	x := xattrAt{fd: -1, path: procPath(d, name)}
	if f != nil {
		x = xattrAt{fd: int(f.Fd())}
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		if err := im.dir(f, rel, ino, base); err != nil {
			return err
		}
	case syscall.S_IFREG:
		if err := im.content(f, rel, ino, &st, base); err != nil {
			return err
		}
	}
	if err := im.xattrs(x, rel, ino); err != nil {
		return err
	}
	return im.finish(rel, ino, &st, base)
}

// readlinkAt reads the symlink an O_PATH|O_NOFOLLOW descriptor holds;
// size is its lstat size.
func readlinkAt(pfd int, size int64) (string, error) {
	buf := make([]byte, max(size+1, 256))
	for {
		n, err := unix.Readlinkat(pfd, "", buf)
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}

// unchanged reports whether the base node still describes the native entry.
func unchanged(b *tree.Node, st *unix.Stat_t) bool {
	return b != nil && b.Mode == st.Mode && b.Uid == st.Uid && b.Gid == st.Gid &&
		(b.IsDir() || b.Size == uint64(st.Size)) && b.Mtime == mtime(st)
}

// finish sets the final times: after the children, which touched them.
func (im *Importer) finish(rel string, ino uint64, st *unix.Stat_t, base *tree.Node) error {
	r := &journal.Record{Op: journal.OpSetattr, Ino: ino, Valid: journal.SetAtime | journal.SetMtime,
		Atime: atime(st), Mtime: mtime(st), Time: ctime(st)}
	if unchanged(base, st) {
		r.Atime, r.Time = base.Atime, base.Ctime
	}
	return im.apply(r, rel)
}

// content records a regular file's content; f is open on it unless the
// base's stat check says it is unchanged.
func (im *Importer) content(f *os.File, rel string, ino uint64, st *unix.Stat_t, base *tree.Node) error {
	r := &journal.Record{Op: journal.OpData, Ino: ino, Size: uint64(st.Size), Mtime: mtime(st)}
	im.files++
	if f == nil {
		for i, h := range base.ChunkHashes() {
			r.Chunks = append(r.Chunks, journal.Chunk{Index: uint64(i), Hash: h})
		}
	} else {
		var like *tree.Node
		if unchanged(base, st) {
			like = base // read only because its ctime is recent (Since)
		}
		size, err := im.readChunks(f, rel, r, like)
		if err != nil {
			return err
		}
		r.Size = size // the file may have changed while we read: trust what we read
	}
	if im.Progress != nil {
		im.Progress(im.files, im.bytes)
	}
	return im.apply(r, rel)
}

// readChunks stores the file's chunks and lists them in r; all-zero
// chunks become holes. like, if set, is the base node whose stat the file
// matched: a slot that reads as like's keeps like's hash. A tree stores a
// chunk shorter than its slot (a write, then a grow: the rest reads as
// zeros) and may keep zeros as data, while a read stores the slot whole
// and zeros as a hole; without this a file nobody touched since base
// would differ from it by hash alone and be taken for a change underneath
// (DESIGN invariant 14).
func (im *Importer) readChunks(f *os.File, rel string, r *journal.Record, like *tree.Node) (uint64, error) {
	var fst unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &fst); err != nil {
		return 0, fmt.Errorf("import %s: %w", rel, err)
	}
	var size uint64
	data := int64(-1) // where SEEK_DATA last found data
	for idx := uint64(0); ; idx++ {
		off := int64(idx * cas.ChunkSize)
		if data < off {
			data = dataAt(f, off)
		}
		var n int
		var rerr error
		if data >= off+cas.ChunkSize && off+cas.ChunkSize <= fst.Size {
			// A whole slot in a hole reads as zeros: a sparse file's
			// gigabytes of holes are not read.
			n = copy(im.buf, zeroChunk[:])
		} else {
			n, rerr = f.ReadAt(im.buf, off)
		}
		if n > 0 {
			var h cas.Hash
			if lh, ok := im.sameSlot(like, idx, im.buf[:n]); ok {
				h = lh
			} else if !zero(im.buf[:n]) {
				var err error
				if h, err = im.Store.Put(im.buf[:n]); err != nil {
					return 0, fmt.Errorf("import %s: %w", rel, err)
				}
			}
			r.Chunks = append(r.Chunks, journal.Chunk{Index: idx, Hash: h})
			size += uint64(n)
			im.bytes += int64(n)
		}
		if rerr == io.EOF || n == 0 {
			return size, nil
		}
		if rerr != nil {
			return 0, fmt.Errorf("import %s: %w", rel, rerr)
		}
	}
}

// dataAt returns the first offset at or after off that holds data
// (SEEK_DATA): MaxInt64 when none does, off when the file system cannot
// tell. It moves f's offset, which ReadAt does not use.
func dataAt(f *os.File, off int64) int64 {
	at, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	switch {
	case errors.Is(err, unix.ENXIO):
		return math.MaxInt64
	case err != nil:
		return off
	}
	return at
}

// sameSlot returns like's hash for chunk slot idx if b is what that slot
// reads as (false without like, or if the chunk cannot be read).
func (im *Importer) sameSlot(like *tree.Node, idx uint64, b []byte) (cas.Hash, bool) {
	if like == nil {
		return cas.Hash{}, false
	}
	var h cas.Hash
	if hs := like.ChunkHashes(); idx < uint64(len(hs)) {
		h = hs[idx]
	}
	stored, err := chunkBytes(im.Store, h)
	return h, err == nil && sameSlotBytes(stored, b)
}

func (im *Importer) xattrs(x xattrAt, rel string, ino uint64) error {
	for _, name := range x.names() {
		v, err := x.value(name)
		if err != nil {
			continue
		}
		if err := im.apply(&journal.Record{Op: journal.OpSetxattr, Ino: ino, XName: name, XValue: v}, rel); err != nil {
			return err
		}
	}
	return nil
}

// zeroChunk is a slot of zeros, to compare with (bytes.Equal is
// vectorized; a byte loop over a sparse file's gigabytes is not).
var zeroChunk [cas.ChunkSize]byte

func zero(b []byte) bool {
	for len(b) > len(zeroChunk) {
		if !bytes.Equal(b[:len(zeroChunk)], zeroChunk[:]) {
			return false
		}
		b = b[len(zeroChunk):]
	}
	return bytes.Equal(b, zeroChunk[:len(b)])
}

func atime(st *unix.Stat_t) int64 { return st.Atim.Nano() }
func mtime(st *unix.Stat_t) int64 { return st.Mtim.Nano() }
func ctime(st *unix.Stat_t) int64 { return st.Ctim.Nano() }
