package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/reynfs/reynfs/fs/tree"
)

// History is what the read-only views need: the timeline and the tree at
// any retained seq (immutable once built).
type History interface {
	// Generations lists the generation names (g1, g2, ...) and their seqs.
	Generations() (names []string, seqs []uint64, err error)
	// Timeline is the text of the views' timeline file (.reynfs/timeline).
	Timeline() (string, error)
	// Tree returns the state at seq, or an error wrapping tree.ErrNotExist
	// for a seq that is not retained.
	Tree(seq uint64) (*tree.Tree, error)
}

// ViewDir is the default name of the hidden directory of read-only history
// views (Options.ViewsName renames it). readdir of the root never lists
// it, so find, grep -r and git add -A do not descend into history; lookup,
// cd, ls, cat and cp -a work.
const ViewDir = ".reynfs"

// CheckViewsName refuses a views name that is not one path component, and
// a project directory dir that has its own top-level entry of that name:
// the views would hide it (and a readdir that listed it would hide the
// views), so the mount must name the views differently.
func CheckViewsName(dir, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > tree.MaxName {
		return fmt.Errorf("views name %q: want one file name", name)
	}
	if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
		return fmt.Errorf("%s has its own %s, which the history views would hide; mount with --views-name NAME to name the views differently", dir, name)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("check %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// Node ids of the views have the top bit set; a view tree's node id holds
// its view index and the inode number inside it, and is also its st_ino,
// so no view inode shares (dev, ino) with a live one.
const (
	viewBit     = 1 << 63
	viewRoot    = viewBit | 1
	viewGens    = viewBit | 2
	viewSeqs    = viewBit | 3
	viewTimelne = viewBit | 4
	viewShift   = 40
	inoMask     = 1<<viewShift - 1
)

func isView(nodeid uint64) bool { return nodeid&viewBit != 0 }

type views struct {
	hist History
	// private limits the views to owner and root: the directories above
	// the view trees are theirs alone (0500), and the handlers refuse
	// anyone else (FS.viewDenied).
	private    bool
	owner, gid uint32
	mu         sync.Mutex
	bySeq      map[uint64]uint64 // seq -> view index
	seqOf      []uint64          // view index -> seq (index 0 unused)
	trees      map[uint64]*tree.Tree
	order      []uint64 // view indexes by age, for a small cache
}

const maxViewTrees = 8

func newViews(h History, private bool, owner, gid uint32) *views {
	return &views{hist: h, private: private, owner: owner, gid: gid,
		bySeq: map[uint64]uint64{}, seqOf: []uint64{0}, trees: map[uint64]*tree.Tree{}}
}

func (v *views) index(seq uint64) uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if idx, ok := v.bySeq[seq]; ok {
		return idx
	}
	idx := uint64(len(v.seqOf))
	v.seqOf = append(v.seqOf, seq)
	v.bySeq[seq] = idx
	return idx
}

// tree returns the tree of view idx, rebuilding it if it left the cache.
func (v *views) tree(idx uint64) (*tree.Tree, error) {
	v.mu.Lock()
	if t, ok := v.trees[idx]; ok {
		v.mu.Unlock()
		return t, nil
	}
	if idx == 0 || idx >= uint64(len(v.seqOf)) {
		v.mu.Unlock()
		return nil, tree.ErrStale
	}
	seq := v.seqOf[idx]
	v.mu.Unlock()
	t, err := v.hist.Tree(seq)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.order) >= maxViewTrees {
		delete(v.trees, v.order[0])
		v.order = v.order[1:]
	}
	v.trees[idx] = t
	v.order = append(v.order, idx)
	return t, nil
}

// node resolves a view tree's node id.
func (v *views) node(nodeid uint64) (*tree.Tree, *tree.Node, error) {
	idx, ino := (nodeid&^viewBit)>>viewShift, nodeid&inoMask
	t, err := v.tree(idx)
	if err != nil {
		return nil, nil, err
	}
	n := t.Node(ino)
	if n == nil {
		return nil, nil, tree.ErrStale
	}
	return t, n, nil
}

func nodeID(idx, ino uint64) uint64 { return viewBit | idx<<viewShift | ino }

// topStat is the attributes of the directories and the timeline above the
// view trees: everyone's to read, or with private views the owner's.
func (v *views) topStat(id uint64, typ uint32, size uint64) tree.Stat {
	a := tree.Attr{Ino: id, Mode: typ | 0o555, Nlink: 2, Size: size}
	if typ == syscall.S_IFREG {
		a.Mode, a.Nlink = typ|0o444, 1
	}
	if v.private {
		a.Mode &^= 0o055
		a.Uid, a.Gid = v.owner, v.gid
	}
	return tree.Stat{Attr: a}
}

// stat returns the attributes of a view node id.
func (v *views) stat(id uint64) (tree.Stat, error) {
	switch id {
	case viewRoot, viewGens, viewSeqs:
		return v.topStat(id, syscall.S_IFDIR, 0), nil
	case viewTimelne:
		text, err := v.hist.Timeline()
		if err != nil {
			return tree.Stat{}, err
		}
		return v.topStat(id, syscall.S_IFREG, uint64(len(text))), nil
	}
	_, n, err := v.node(id)
	if err != nil {
		return tree.Stat{}, err
	}
	st := tree.Stat{Attr: n.Attr, Blocks: n.Blocks()}
	st.Ino = id
	st.Mode &^= 0o222 // read-only
	return st, nil
}

// lookup finds name in view directory parent.
func (v *views) lookup(parent uint64, name string) (tree.Stat, error) {
	switch parent {
	case viewRoot:
		switch name {
		case "generations":
			return v.stat(viewGens)
		case "seq":
			return v.stat(viewSeqs)
		case "timeline":
			return v.stat(viewTimelne)
		}
		return tree.Stat{}, tree.ErrNotExist
	case viewGens:
		names, seqs, err := v.hist.Generations()
		if err != nil {
			return tree.Stat{}, err
		}
		for i, n := range names {
			if n == name {
				return v.stat(nodeID(v.index(seqs[i]), tree.RootIno))
			}
		}
		return tree.Stat{}, tree.ErrNotExist
	case viewSeqs:
		seq, err := strconv.ParseUint(name, 10, 64)
		if err != nil || strconv.FormatUint(seq, 10) != name {
			return tree.Stat{}, tree.ErrNotExist
		}
		if _, err := v.hist.Tree(seq); err != nil {
			return tree.Stat{}, err
		}
		return v.stat(nodeID(v.index(seq), tree.RootIno))
	}
	t, _, err := v.node(parent)
	if err != nil {
		return tree.Stat{}, err
	}
	c, err := t.Lookup(parent&inoMask, name)
	if err != nil {
		return tree.Stat{}, err
	}
	return v.stat(parent&^inoMask | c.Ino)
}

// readdir lists a view directory.
func (v *views) readdir(id uint64) ([]tree.Dirent, uint64, error) {
	switch id {
	case viewRoot:
		return []tree.Dirent{{Name: "generations", Ino: viewGens, Mode: syscall.S_IFDIR},
			{Name: "seq", Ino: viewSeqs, Mode: syscall.S_IFDIR},
			{Name: "timeline", Ino: viewTimelne, Mode: syscall.S_IFREG}}, tree.RootIno, nil
	case viewGens:
		names, seqs, err := v.hist.Generations()
		if err != nil {
			return nil, 0, err
		}
		out := make([]tree.Dirent, len(names))
		for i, n := range names {
			out[i] = tree.Dirent{Name: n, Ino: nodeID(v.index(seqs[i]), tree.RootIno), Mode: syscall.S_IFDIR}
		}
		return out, viewRoot, nil
	case viewSeqs:
		return nil, viewRoot, nil // any retained seq can be looked up; listing them all would be the whole journal
	}
	t, n, err := v.node(id)
	if err != nil {
		return nil, 0, err
	}
	ents, err := t.Readdir(n.Ino)
	if err != nil {
		return nil, 0, err
	}
	for i := range ents {
		ents[i].Ino = id&^inoMask | ents[i].Ino
	}
	parent := id&^inoMask | t.Parent(n.Ino)
	if n.Ino == tree.RootIno {
		parent = viewGens
	}
	return ents, parent, nil
}

func (v *views) read(id uint64, p []byte, off uint64) (int, error) {
	if id == viewTimelne {
		text, err := v.hist.Timeline()
		if err != nil {
			return 0, err
		}
		if off >= uint64(len(text)) {
			return 0, nil
		}
		return copy(p, text[off:]), nil
	}
	t, n, err := v.node(id)
	if err != nil {
		return 0, err
	}
	if n.IsDir() {
		return 0, tree.ErrIsDir
	}
	return t.ReadAt(n, p, off)
}

func (v *views) readlink(id uint64) (string, error) {
	_, n, err := v.node(id)
	if err != nil {
		return "", err
	}
	return n.Readlink()
}

func (v *views) xattr(id uint64, name string) ([]byte, error) {
	if !isViewTree(id) {
		return nil, tree.ErrNoAttr
	}
	_, n, err := v.node(id)
	if err != nil {
		return nil, err
	}
	return n.Xattr(name)
}

func (v *views) xattrNames(id uint64) ([]string, error) {
	if !isViewTree(id) {
		return nil, nil
	}
	_, n, err := v.node(id)
	if err != nil {
		return nil, err
	}
	return n.XattrNames(), nil
}

func isViewTree(id uint64) bool { return isView(id) && (id&^viewBit)>>viewShift != 0 }

// viewEntry fills an EntryOut for a view node; views never change, so the
// kernel may keep them as long as it likes.
func (f *FS) viewEntry(st tree.Stat, err error, out *fuse.EntryOut) fuse.Status {
	if err != nil {
		return f.status("lookup", err)
	}
	f.fillEntry(&st, out)
	return fuse.OK
}
