package rewind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
type Importer struct {
	Store cas.Store
	Base  *tree.Tree
	// Alloc hands out inode numbers for new entries.
	Alloc func() (uint64, error)
	// Progress, if set, is called after each file with running totals.
	Progress func(files int, bytes int64)
	// Ctx, if set, cancels the import (Ctrl-C during a long first mount):
	// Import then returns its error and nothing has been committed.
	Ctx context.Context

	t     *tree.Tree
	links map[[2]uint64]uint64 // native (dev, ino) -> our ino, for hard links
	files int
	bytes int64
	buf   []byte
}

// Import reads dir into a new tree.
func (im *Importer) Import(dir string) (*tree.Tree, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return nil, fmt.Errorf("import %s: %w", dir, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, fmt.Errorf("import %s: %w", dir, tree.ErrNotDir)
	}
	im.t = tree.New(im.Store, st.Mode, st.Uid, st.Gid, ctime(&st))
	im.links = map[[2]uint64]uint64{}
	im.buf = make([]byte, cas.ChunkSize)
	var base *tree.Node
	if im.Base != nil {
		base = im.Base.Node(tree.RootIno)
	}
	if err := im.dir(dir, tree.RootIno, base); err != nil {
		return nil, err
	}
	if err := im.finish(dir, tree.RootIno, &st, base); err != nil {
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

// dir imports the entries of the native directory path into directory ino.
func (im *Importer) dir(path string, ino uint64, base *tree.Node) error {
	ents, err := os.ReadDir(path)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		if err := im.entry(filepath.Join(path, e.Name()), ino, e.Name(), base); err != nil {
			return err
		}
	}
	return nil
}

func (im *Importer) entry(path string, parent uint64, name string, baseDir *tree.Node) error {
	if im.Ctx != nil {
		if err := im.Ctx.Err(); err != nil {
			return fmt.Errorf("import %s: %w", path, err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil // removed while we walked
		}
		return fmt.Errorf("import %s: %w", path, err)
	}
	key := [2]uint64{st.Dev, st.Ino}
	if ino, ok := im.links[key]; ok && st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		// The link keeps the inode's ctime: finish set it already.
		return im.apply(&journal.Record{Op: journal.OpLink, Parent: parent, Name: name, Ino: ino, Time: im.t.Node(ino).Ctime}, path)
	}
	var base *tree.Node
	if baseDir != nil {
		if bino, ok := baseDir.Entries()[name]; ok {
			if b := im.Base.Node(bino); b != nil && b.Mode&syscall.S_IFMT == st.Mode&syscall.S_IFMT && im.t.Node(bino) == nil {
				base = b
			}
		}
	}
	var ino uint64
	if base != nil {
		ino = base.Ino
	} else {
		var err error
		if ino, err = im.Alloc(); err != nil {
			return err
		}
	}
	r := &journal.Record{Parent: parent, Name: name, Ino: ino, Mode: st.Mode, Uid: st.Uid, Gid: st.Gid, Time: ctime(&st)}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		r.Op = journal.OpMkdir
	case syscall.S_IFLNK:
		target, err := os.Readlink(path)
		if err != nil {
			return fmt.Errorf("import %s: %w", path, err)
		}
		r.Op, r.Target = journal.OpSymlink, target
	default:
		r.Op, r.Rdev = journal.OpCreate, uint32(st.Rdev)
	}
	if err := im.apply(r, path); err != nil {
		return err
	}
	im.links[key] = ino
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		if err := im.dir(path, ino, base); err != nil {
			return err
		}
	case syscall.S_IFREG:
		if err := im.content(path, ino, &st, base); err != nil {
			return err
		}
	}
	if err := im.xattrs(path, ino); err != nil {
		return err
	}
	return im.finish(path, ino, &st, base)
}

// unchanged reports whether the base node still describes the native entry.
func unchanged(b *tree.Node, st *syscall.Stat_t) bool {
	return b != nil && b.Mode == st.Mode && b.Uid == st.Uid && b.Gid == st.Gid &&
		(b.IsDir() || b.Size == uint64(st.Size)) && b.Mtime == mtime(st)
}

// finish sets the final times: after the children, which touched them.
func (im *Importer) finish(path string, ino uint64, st *syscall.Stat_t, base *tree.Node) error {
	r := &journal.Record{Op: journal.OpSetattr, Ino: ino, Valid: journal.SetAtime | journal.SetMtime,
		Atime: atime(st), Mtime: mtime(st), Time: ctime(st)}
	if unchanged(base, st) {
		r.Atime, r.Time = base.Atime, base.Ctime
	}
	return im.apply(r, path)
}

func (im *Importer) content(path string, ino uint64, st *syscall.Stat_t, base *tree.Node) error {
	r := &journal.Record{Op: journal.OpData, Ino: ino, Size: uint64(st.Size), Mtime: mtime(st)}
	im.files++
	if unchanged(base, st) {
		for i, h := range base.ChunkHashes() {
			r.Chunks = append(r.Chunks, journal.Chunk{Index: uint64(i), Hash: h})
		}
	} else {
		size, err := im.readChunks(path, r)
		if err != nil {
			return err
		}
		r.Size = size // the file may have changed while we read: trust what we read
	}
	if im.Progress != nil {
		im.Progress(im.files, im.bytes)
	}
	return im.apply(r, path)
}

// readChunks stores the file's chunks and lists them in r; all-zero
// chunks become holes.
func (im *Importer) readChunks(path string, r *journal.Record) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("import: %w", err)
	}
	defer f.Close()
	var size uint64
	for idx := uint64(0); ; idx++ {
		n, rerr := io.ReadFull(f, im.buf)
		if n > 0 {
			var h cas.Hash
			if !zero(im.buf[:n]) {
				if h, err = im.Store.Put(im.buf[:n]); err != nil {
					return 0, fmt.Errorf("import %s: %w", path, err)
				}
			}
			r.Chunks = append(r.Chunks, journal.Chunk{Index: idx, Hash: h})
			size += uint64(n)
			im.bytes += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return size, nil
		}
		if rerr != nil {
			return 0, fmt.Errorf("import %s: %w", path, rerr)
		}
	}
}

func (im *Importer) xattrs(path string, ino uint64) error {
	sz, err := unix.Llistxattr(path, nil)
	if err != nil || sz == 0 {
		return nil // no xattrs, or a file system without them
	}
	buf := make([]byte, sz)
	if sz, err = unix.Llistxattr(path, buf); err != nil {
		return nil
	}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:sz]), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		v, err := lgetxattr(path, name)
		if err != nil {
			continue
		}
		if err := im.apply(&journal.Record{Op: journal.OpSetxattr, Ino: ino, XName: name, XValue: v}, path); err != nil {
			return err
		}
	}
	return nil
}

func lgetxattr(path, name string) ([]byte, error) {
	sz, err := unix.Lgetxattr(path, name, nil)
	if err != nil {
		return nil, err
	}
	v := make([]byte, sz)
	sz, err = unix.Lgetxattr(path, name, v)
	return v[:sz], err
}

func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func atime(st *syscall.Stat_t) int64 { return st.Atim.Nano() }
func mtime(st *syscall.Stat_t) int64 { return st.Mtim.Nano() }
func ctime(st *syscall.Stat_t) int64 { return st.Ctim.Nano() }
