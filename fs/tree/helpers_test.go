package tree

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// Shared helpers of the tree tests: a tree over an in-memory store, record
// builders, a Root that stores its blobs, a namespace snapshot and a small
// path-keyed model of the namespace that predicts Apply's results.

const (
	rootMode = 0o755
	rootUid  = 1000
	rootGid  = 1000
	rootTime = 1_700_000_000_000_000_000
)

func newTestTree(t testing.TB) (*Tree, *cas.Memory) {
	t.Helper()
	s := cas.NewMemory()
	return New(s, rootMode, rootUid, rootGid, rootTime), s
}

// Record builders. Times are fixed so that roots are reproducible.
func rCreate(parent uint64, name string, ino uint64) *journal.Record {
	return &journal.Record{Op: journal.OpCreate, Parent: parent, Name: name, Ino: ino, Mode: syscall.S_IFREG | 0o644, Uid: 1, Gid: 2, Time: 10}
}
func rMknod(parent uint64, name string, ino uint64, mode, rdev uint32) *journal.Record {
	return &journal.Record{Op: journal.OpCreate, Parent: parent, Name: name, Ino: ino, Mode: mode, Rdev: rdev, Time: 10}
}
func rMkdir(parent uint64, name string, ino uint64) *journal.Record {
	return &journal.Record{Op: journal.OpMkdir, Parent: parent, Name: name, Ino: ino, Mode: 0o755, Time: 11}
}
func rSymlink(parent uint64, name string, ino uint64, target string) *journal.Record {
	return &journal.Record{Op: journal.OpSymlink, Parent: parent, Name: name, Ino: ino, Target: target, Time: 12}
}
func rLink(ino, parent uint64, name string) *journal.Record {
	return &journal.Record{Op: journal.OpLink, Ino: ino, Parent: parent, Name: name, Time: 13}
}
func rUnlink(parent uint64, name string) *journal.Record {
	return &journal.Record{Op: journal.OpUnlink, Parent: parent, Name: name, Time: 14}
}
func rRmdir(parent uint64, name string) *journal.Record {
	return &journal.Record{Op: journal.OpRmdir, Parent: parent, Name: name, Time: 15}
}
func rRename(p uint64, name string, np uint64, nn string, flags uint32) *journal.Record {
	return &journal.Record{Op: journal.OpRename, Parent: p, Name: name, NewParent: np, NewName: nn, Flags: flags, Time: 16}
}
func rChmod(ino uint64, mode uint32, now int64) *journal.Record {
	return &journal.Record{Op: journal.OpSetattr, Ino: ino, Valid: journal.SetMode, Mode: mode, Time: now}
}
func rSetxattr(ino uint64, name, val string, flags uint32) *journal.Record {
	return &journal.Record{Op: journal.OpSetxattr, Ino: ino, XName: name, XValue: []byte(val), Flags: flags, Time: 17}
}
func rRemovexattr(ino uint64, name string) *journal.Record {
	return &journal.Record{Op: journal.OpRemovexattr, Ino: ino, XName: name, Time: 18}
}

func mustApply(t testing.TB, tr *Tree, rs ...*journal.Record) {
	t.Helper()
	for _, r := range rs {
		if err := r.Validate(); err != nil {
			t.Fatalf("record %+v: %v", r, err)
		}
		if err := tr.Apply(r); err != nil {
			t.Fatalf("apply %v %q: %v", r.Op, r.Name, err)
		}
		if err := tr.Check(); err != nil {
			t.Fatalf("after %v %q: %v", r.Op, r.Name, err)
		}
	}
}

// storeRoot returns the tree's Merkle root after putting the objects Root
// made into s (as a caller must before recording the root).
func storeRoot(t testing.TB, tr *Tree, s cas.Store) cas.Hash {
	t.Helper()
	h, blobs, err := tr.Root()
	if err != nil {
		t.Fatalf("root: %v", err)
	}
	for _, b := range blobs {
		if got, err := s.Put(b.Data); err != nil || got != b.Hash {
			t.Fatalf("put root blob: %v (hash %s, want %s)", err, got.Short(), b.Hash.Short())
		}
	}
	return h
}

// flushApply journals a node's pending data the way Live does, without a
// journal: store the chunks, apply the record, drop the buffers.
func flushApply(t testing.TB, tr *Tree, s cas.Store, n *Node) *journal.Record {
	t.Helper()
	r, blobs := tr.Flush(n, journal.DataWrite)
	for _, b := range blobs {
		if h, err := s.Put(b.Data); err != nil || h != b.Hash {
			t.Fatalf("put chunk: %v", err)
		}
	}
	r.Time = n.Mtime
	if err := r.Validate(); err != nil {
		t.Fatalf("flush record: %v", err)
	}
	if err := tr.Apply(r); err != nil {
		t.Fatalf("apply flush record: %v", err)
	}
	n.ClearPending()
	return r
}

// mEntry is what a snapshot records about one name.
type mEntry struct {
	Ino   uint64
	Type  uint32 // S_IFMT bits
	Nlink uint32
}

func (e mEntry) String() string {
	return fmt.Sprintf("{ino %d type %o nlink %d}", e.Ino, e.Type, e.Nlink)
}

// snapshot walks the namespace: path -> entry, the root included as "/".
func snapshot(tr *Tree) map[string]mEntry {
	out := map[string]mEntry{}
	var walk func(dir uint64, p string)
	walk = func(dir uint64, p string) {
		n := tr.Node(dir)
		out[p] = mEntry{n.Ino, n.Mode & syscall.S_IFMT, n.Nlink}
		ents, _ := tr.Readdir(dir)
		for _, e := range ents {
			cp := path.Join(p, e.Name)
			c := tr.Node(e.Ino)
			if c.IsDir() {
				walk(c.Ino, cp)
			} else {
				out[cp] = mEntry{c.Ino, c.Mode & syscall.S_IFMT, c.Nlink}
			}
		}
	}
	walk(RootIno, "/")
	return out
}

func diffSnapshots(want, got map[string]mEntry) string {
	var b strings.Builder
	keys := slices.Sorted(maps.Keys(want))
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		w, wok := want[k]
		g, gok := got[k]
		switch {
		case !wok:
			fmt.Fprintf(&b, "  extra %s %v\n", k, g)
		case !gok:
			fmt.Fprintf(&b, "  missing %s %v\n", k, w)
		case w != g:
			fmt.Fprintf(&b, "  %s: want %v, got %v\n", k, w, g)
		}
	}
	return b.String()
}

// model is a path-keyed model of the namespace: every name is a path,
// directories have one path, hard links are paths sharing an inode. It is
// deliberately a different data structure from Tree (no parent links, no
// counters), so that bookkeeping bugs in Tree show up as differences. Its
// error precedence follows Linux/ext4 (do_renameat2, vfs_rename) as far as
// the tree can see it.
type model struct {
	paths map[string]uint64 // "/" included
	types map[uint64]uint32 // ino -> S_IFMT
}

func newModel() *model {
	return &model{paths: map[string]uint64{"/": RootIno}, types: map[uint64]uint32{RootIno: syscall.S_IFDIR}}
}

// dirPath returns the path of directory ino, or an error as Tree.dir does.
func (m *model) dirPath(ino uint64) (string, error) {
	typ, ok := m.types[ino]
	if !ok {
		return "", ErrStale
	}
	if typ != syscall.S_IFDIR {
		return "", ErrNotDir
	}
	for p, i := range m.paths {
		if i == ino {
			return p, nil
		}
	}
	panic("directory without a path")
}

func (m *model) children(dir string) []string {
	var out []string
	for p := range m.paths {
		if p != "/" && path.Dir(p) == dir {
			out = append(out, p)
		}
	}
	return out
}

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

func (m *model) isDir(p string) bool { return m.types[m.paths[p]] == syscall.S_IFDIR }

func (m *model) create(parent uint64, name string, ino uint64, typ uint32) error {
	dp, err := m.dirPath(parent)
	if err != nil {
		return err
	}
	if _, ok := m.paths[path.Join(dp, name)]; ok {
		return ErrExist
	}
	m.paths[path.Join(dp, name)] = ino
	m.types[ino] = typ
	return nil
}

func (m *model) link(ino, parent uint64, name string) error {
	dp, err := m.dirPath(parent)
	if err != nil {
		return err
	}
	typ, ok := m.types[ino]
	if !ok {
		return ErrNotExist
	}
	if typ == syscall.S_IFDIR {
		return ErrInvalid // the kernel says EPERM before asking the file system
	}
	if _, ok := m.paths[path.Join(dp, name)]; ok {
		return ErrExist
	}
	m.paths[path.Join(dp, name)] = ino
	return nil
}

func (m *model) remove(parent uint64, name string, rmdir bool) error {
	dp, err := m.dirPath(parent)
	if err != nil {
		return err
	}
	p := path.Join(dp, name)
	ino, ok := m.paths[p]
	if !ok {
		return ErrNotExist
	}
	switch {
	case rmdir && !m.isDir(p):
		return ErrNotDir
	case rmdir && len(m.children(p)) > 0:
		return ErrNotEmpty
	case !rmdir && m.isDir(p):
		return ErrIsDir
	}
	delete(m.paths, p)
	m.gc(ino)
	return nil
}

// gc forgets an inode with no name left.
func (m *model) gc(ino uint64) {
	for _, i := range m.paths {
		if i == ino {
			return
		}
	}
	delete(m.types, ino)
}

// move renames every path at or below from to the same path below to.
func (m *model) move(from, to string, into map[string]uint64) {
	for p, ino := range m.paths {
		if p == from || strings.HasPrefix(p, from+"/") {
			delete(m.paths, p)
			into[to+strings.TrimPrefix(p, from)] = ino
		}
	}
}

func (m *model) rename(parent uint64, name string, np uint64, nn string, flags uint32) error {
	sp, err := m.dirPath(parent)
	if err != nil {
		return err
	}
	dp, err := m.dirPath(np)
	if err != nil {
		return err
	}
	src, dst := path.Join(sp, name), path.Join(dp, nn)
	ino, ok := m.paths[src]
	if !ok {
		return ErrNotExist
	}
	oino, exists := m.paths[dst]
	switch {
	case flags == journal.RenameExchange && !exists:
		return ErrNotExist
	case flags == journal.RenameNoreplace && exists:
		return ErrExist
	case m.isDir(src) && under(dp, src):
		return ErrInvalid
	}
	if flags == journal.RenameExchange {
		if m.isDir(dst) && under(sp, dst) {
			return ErrInvalid
		}
		if ino == oino {
			return nil
		}
		moved := map[string]uint64{}
		m.move(src, dst, moved)
		m.move(dst, src, moved)
		maps.Copy(m.paths, moved)
		return nil
	}
	if exists {
		if ino == oino {
			return nil
		}
		switch {
		case m.isDir(src) && !m.isDir(dst):
			return ErrNotDir
		case !m.isDir(src) && m.isDir(dst):
			// Linux says ENOTEMPTY when dst is an ancestor of src (the
			// rename trap), but the kernel decides that before the file
			// system is asked; the tree's EISDIR is fine for replay.
			return ErrIsDir
		case m.isDir(dst) && len(m.children(dst)) > 0:
			return ErrNotEmpty
		}
		delete(m.paths, dst)
		m.gc(oino)
	}
	moved := map[string]uint64{}
	m.move(src, dst, moved)
	maps.Copy(m.paths, moved)
	return nil
}

// snapshot returns the model's namespace in snapshot form, with the link
// counts ext4 reports: names per file, 2 + subdirectories per directory.
func (m *model) snapshot() map[string]mEntry {
	names := map[uint64]uint32{}
	for _, ino := range m.paths {
		names[ino]++
	}
	out := map[string]mEntry{}
	for p, ino := range m.paths {
		typ := m.types[ino]
		nlink := names[ino]
		if typ == syscall.S_IFDIR {
			nlink = 2
			for _, c := range m.children(p) {
				if m.isDir(c) {
					nlink++
				}
			}
		}
		out[p] = mEntry{ino, typ, nlink}
	}
	return out
}

// sameErr reports whether got is want (both nil, or errors.Is).
func sameErr(want, got error) bool {
	if want == nil || got == nil {
		return want == got
	}
	return errors.Is(got, want)
}
