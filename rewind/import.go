package rewind

import (
	"context"
	"errors"
	"fmt"
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
//
// A first mount reads every file, so the import is a pipeline (see
// import_pipe.go): one goroutine walks the directories in name order and
// decides everything that depends on the walk (inode numbers, hard links,
// the stat check); Workers goroutines read and hash the files and store
// their chunks in batches; the calling goroutine applies the walk's records
// to the tree in the walk's order, waiting for a file's chunks where it
// needs them. The tree, and so its root hash, is the sequential import's
// (Workers: 1) whatever the order the files are read in.
type Importer struct {
	Store cas.Store
	Base  *tree.Tree
	// Pin names paths whose native state is not what Base says because a
	// write-back failed there: the import keeps Base's version of them
	// (or leaves them out if Base has none) instead of reading the
	// directory, so a failed write-back is not mistaken for a change.
	Pin PathSet
	// Alloc hands out inode numbers for new entries. The walk calls it,
	// in name order.
	Alloc func() (uint64, error)
	// Progress, if set, is called after each file with running totals,
	// on the goroutine that called Import.
	Progress func(files int, bytes int64)
	// Ctx, if set, cancels the import (Ctrl-C during a long first mount):
	// Import then returns its error and nothing has been committed.
	Ctx context.Context
	// Since, if set (Unix ns), is read in full even when its stat matches
	// Base for a file whose ctime is at or after it: a same-size write
	// with its mtime put back (UnderneathSince).
	Since int64
	// Workers is how many goroutines read files (0: readersPerCPU per
	// CPU, see import_pipe.go). With 1
	// the walk reads each file itself when it meets it: the sequential
	// import, which the parallel one must equal.
	Workers int
	// Fresh says the store holds none of the objects the import will
	// write (the first import into a new store): the readers store
	// chunks without looking each one up (cas.FreshPutter), and keep a
	// set of what they wrote so that equal files are stored once. One
	// stored after all (by an import killed before its commit) is
	// written again, which wastes its bytes until the compactor drops
	// the older copy.
	Fresh bool

	t     *tree.Tree           // the applier's
	links map[[2]uint64]uint64 // native (dev, ino) -> our ino, for hard links
	used  map[uint64]bool      // the inodes the tree holds once the steps so far are applied
	files int
	bytes int64
	p     *pipeline
	warm  *warmer // nil for the sequential import
	held  bool    // the import-stall fault point has held the walk
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
	im.used = map[uint64]bool{tree.RootIno: true}
	im.files, im.bytes = 0, 0
	var base *tree.Node
	if im.Base != nil {
		base = im.Base.Node(tree.RootIno)
	}
	if im.Workers != 1 {
		im.warm = startWarmer(top)
		defer func() {
			im.warm.close()
			im.warm = nil
		}()
	}
	err := im.run(func() error {
		if err := im.dir(top, "", tree.RootIno, base); err != nil {
			return err
		}
		if err := im.xattrs(xattrAt{fd: int(top.Fd())}, ".", tree.RootIno); err != nil {
			return err
		}
		return im.finish(".", tree.RootIno, &st, base)
	})
	if err != nil {
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

// record emits the application of r.
func (im *Importer) record(r *journal.Record, path string) error {
	return im.emit(func() error { return im.apply(r, path) })
}

// linkTo emits a link of ino at parent/name. It keeps the inode's ctime,
// which the steps before it (the inode's finish) set: read when applied.
func (im *Importer) linkTo(parent uint64, name, rel string, ino uint64) error {
	return im.emit(func() error {
		return im.apply(&journal.Record{Op: journal.OpLink, Parent: parent, Name: name, Ino: ino, Time: im.t.Node(ino).Ctime}, rel)
	})
}

// create emits the record that makes inode r.Ino.
func (im *Importer) create(r *journal.Record, rel string) error {
	im.used[r.Ino] = true
	return im.record(r, rel)
}

// dir imports the entries of the native directory d (at rel) into
// directory ino.
func (im *Importer) dir(d *os.File, rel string, ino uint64, base *tree.Node) error {
	im.warm.enter()
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
	if im.used[b.Ino] && !b.IsDir() {
		return im.linkTo(parent, name, rel, b.Ino)
	}
	ino := b.Ino
	if im.used[ino] {
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
	if err := im.create(r, rel); err != nil {
		return err
	}
	if b.IsReg() {
		d := &journal.Record{Op: journal.OpData, Ino: ino, Size: b.Size, Mtime: b.Mtime}
		for i, h := range b.ChunkHashes() {
			d.Chunks = append(d.Chunks, journal.Chunk{Index: uint64(i), Hash: h})
		}
		if err := im.record(d, rel); err != nil {
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
		if err := im.record(&journal.Record{Op: journal.OpSetxattr, Ino: ino, XName: x, XValue: v}, rel); err != nil {
			return err
		}
	}
	return im.record(&journal.Record{Op: journal.OpSetattr, Ino: ino, Valid: journal.SetAtime | journal.SetMtime,
		Atime: b.Atime, Mtime: b.Mtime, Time: b.Ctime}, rel)
}

func (im *Importer) entry(d *os.File, rel string, parent uint64, name string, baseDir *tree.Node) error {
	if !im.held && os.Getenv(FaultEnv) == "import-stall" {
		// Tests: hold the walk at its first entry until the import is
		// cancelled, so an interrupt lands mid-import however fast the
		// machine reads.
		im.held = true
		<-im.p.ctx.Done()
	}
	if err := im.p.ctx.Err(); err != nil {
		return fmt.Errorf("import %s: %w", rel, context.Cause(im.p.ctx))
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
	owned := true // pfd is ours to close, until a read job takes it
	defer func() {
		if owned {
			unix.Close(pfd)
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return fmt.Errorf("import %s: %w", rel, err)
	}
	key := [2]uint64{st.Dev, st.Ino}
	if ino, ok := im.links[key]; ok && st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return im.linkTo(parent, name, rel, ino)
	}
	var base *tree.Node
	if baseDir != nil {
		if bino, ok := baseDir.Entries()[name]; ok {
			if b := im.Base.Node(bino); b != nil && b.Mode&syscall.S_IFMT == st.Mode&syscall.S_IFMT && !im.used[bino] {
				base = b
			}
		}
	}
	// Open what the walk itself reads, from the pinned inode; a regular
	// file is opened by the worker that reads it, from the same pin.
	var f *os.File
	var target string
	read := false
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		var fd int
		if fd, err = unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			f = os.NewFile(uintptr(fd), rel)
		}
	case syscall.S_IFREG:
		read = !unchanged(base, &st) || (im.Since > 0 && ctime(&st) >= im.Since)
	case syscall.S_IFLNK:
		target, err = readlinkAt(pfd, st.Size)
	}
	if err != nil {
		return fmt.Errorf("import %s: %w", rel, err)
	}
	if f != nil {
		defer f.Close()
		if _, err := sameInode(int(f.Fd()), &st, rel); err != nil {
			return err
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
	if err := im.create(r, rel); err != nil {
		return err
	}
	im.links[key] = ino
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		if err := im.dir(f, rel, ino, base); err != nil {
			return err
		}
		if err := im.xattrs(xattrAt{fd: int(f.Fd())}, rel, ino); err != nil {
			return err
		}
	case syscall.S_IFREG:
		if read {
			// The job's step applies the content, the xattrs and the
			// finish, in the order the sequential walk applies them.
			var like *tree.Node
			if unchanged(base, &st) {
				like = base // read only because its ctime is recent (Since)
			}
			owned = false
			return im.readFile(&fileJob{pfd: pfd, st: st, rel: rel, ino: ino, like: like, base: base})
		}
		if err := im.content(rel, ino, &st, base); err != nil {
			return err
		}
		if err := im.xattrs(xattrAt{fd: -1, path: procPath(d, name)}, rel, ino); err != nil {
			return err
		}
	default:
		if err := im.xattrs(xattrAt{fd: -1, path: procPath(d, name)}, rel, ino); err != nil {
			return err
		}
	}
	return im.finish(rel, ino, &st, base)
}

// sameInode checks that fd, opened from an O_PATH pin, is the inode st
// describes, and returns its fstat.
func sameInode(fd int, st *unix.Stat_t, rel string) (unix.Stat_t, error) {
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil {
		return fst, fmt.Errorf("import %s: %w", rel, err)
	}
	if fst.Dev != st.Dev || fst.Ino != st.Ino {
		return fst, fmt.Errorf("import %s: opened another file than the one stat'ed", rel)
	}
	return fst, nil
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

// finishRecord sets the final times: after the children, which touched
// them.
func finishRecord(ino uint64, st *unix.Stat_t, base *tree.Node) *journal.Record {
	r := &journal.Record{Op: journal.OpSetattr, Ino: ino, Valid: journal.SetAtime | journal.SetMtime,
		Atime: atime(st), Mtime: mtime(st), Time: ctime(st)}
	if unchanged(base, st) {
		r.Atime, r.Time = base.Atime, base.Ctime
	}
	return r
}

func (im *Importer) finish(rel string, ino uint64, st *unix.Stat_t, base *tree.Node) error {
	return im.record(finishRecord(ino, st, base), rel)
}

// content records the content of a regular file the stat check found
// unchanged: base's.
func (im *Importer) content(rel string, ino uint64, st *unix.Stat_t, base *tree.Node) error {
	r := &journal.Record{Op: journal.OpData, Ino: ino, Size: uint64(st.Size), Mtime: mtime(st)}
	for i, h := range base.ChunkHashes() {
		r.Chunks = append(r.Chunks, journal.Chunk{Index: uint64(i), Hash: h})
	}
	return im.emit(func() error {
		im.fileDone(0)
		return im.apply(r, rel)
	})
}

// fileDone counts one more file, n bytes of it read, and reports progress.
func (im *Importer) fileDone(n int64) {
	im.files++
	im.bytes += n
	if im.Progress != nil {
		im.Progress(im.files, im.bytes)
	}
}

// xattr is one extended attribute read from the directory.
type xattr struct {
	name  string
	value []byte
}

// readXattrs reads x's extended attributes (those that vanish or fail
// while read are left out).
func readXattrs(x xattrAt) []xattr {
	var out []xattr
	for _, name := range x.names() {
		if v, err := x.value(name); err == nil {
			out = append(out, xattr{name, v})
		}
	}
	return out
}

func (im *Importer) applyXattrs(xs []xattr, rel string, ino uint64) error {
	for _, x := range xs {
		if err := im.apply(&journal.Record{Op: journal.OpSetxattr, Ino: ino, XName: x.name, XValue: x.value}, rel); err != nil {
			return err
		}
	}
	return nil
}

// xattrs reads x's extended attributes now and emits their records.
func (im *Importer) xattrs(x xattrAt, rel string, ino uint64) error {
	xs := readXattrs(x)
	if len(xs) == 0 {
		return nil
	}
	return im.emit(func() error { return im.applyXattrs(xs, rel, ino) })
}

func atime(st *unix.Stat_t) int64 { return st.Atim.Nano() }
func mtime(st *unix.Stat_t) int64 { return st.Mtim.Nano() }
func ctime(st *unix.Stat_t) int64 { return st.Ctim.Nano() }
