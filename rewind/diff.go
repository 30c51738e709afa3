package rewind

import (
	"syscall"

	"path"
	"sort"
	"sync"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
)

// Change kinds.
const (
	Added    = "added"
	Removed  = "removed"
	Modified = "modified"
)

// Change is one path that differs between two trees.
type Change struct {
	Path  string   `json:"path"`
	Kind  string   `json:"kind"`
	Ino   uint64   `json:"ino"`
	Dir   bool     `json:"dir,omitempty"`
	Mode  uint32   `json:"mode"`
	Old   cas.Hash `json:"old"`
	New   cas.Hash `json:"new"`
	entry bool     // the directory entry itself changed (not only the inode)
	par   uint64
	name  string
}

// Overlay is a store with objects not yet committed on top.
type Overlay struct {
	cas.Store
	mu sync.Mutex
	m  map[cas.Hash][]byte
}

// NewOverlay serves blobs before they are in s.
func NewOverlay(s cas.Store, blobs ...[]cas.Blob) *Overlay {
	o := &Overlay{Store: s, m: map[cas.Hash][]byte{}}
	for _, bs := range blobs {
		o.Add(bs)
	}
	return o
}

// Add puts blobs on top.
func (o *Overlay) Add(bs []cas.Blob) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, b := range bs {
		o.m[b.Hash] = b.Data
	}
}

func (o *Overlay) Get(h cas.Hash) ([]byte, error) {
	o.mu.Lock()
	b, ok := o.m[h]
	o.mu.Unlock()
	if ok {
		return b, nil
	}
	return o.Store.Get(h)
}

// DiffRoots lists what changed from tree a to tree b, both named by their
// Merkle roots, by walking only the subtrees whose hashes differ: the cost
// is proportional to the change, not the tree. Paths are relative, sorted.
func DiffRoots(s cas.Store, a, b cas.Hash) ([]Change, error) {
	var out []Change
	if a == b {
		return nil, nil
	}
	ia, err := inode(s, a)
	if err != nil {
		return nil, err
	}
	ib, err := inode(s, b)
	if err != nil {
		return nil, err
	}
	if !sameAttrs(ia, ib) {
		out = append(out, Change{Path: ".", Kind: Modified, Ino: ib.Ino, Dir: true, Mode: ib.Mode, Old: a, New: b})
	}
	err = diffDirs(s, "", ia, ib, &out)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

// fromTree converts the changes a graft found, sorted as DiffRoots sorts
// its own; never nil.
func fromTree(tcs []tree.Change) []Change {
	kinds := [...]string{tree.Added: Added, tree.Removed: Removed, tree.Modified: Modified}
	out := make([]Change, 0, len(tcs))
	for _, c := range tcs {
		out = append(out, Change{Path: c.Path, Kind: kinds[c.Kind], Ino: c.Ino, Dir: c.Dir, Mode: c.Mode, Old: c.Old, New: c.New,
			entry: c.Entry, par: c.Parent, name: c.Name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func inode(s cas.Store, h cas.Hash) (*cas.Inode, error) {
	b, err := s.Get(h)
	if err != nil {
		return nil, err
	}
	return cas.DecodeInode(b)
}

// sameAttrs compares two inode objects without their entries.
func sameAttrs(a, b *cas.Inode) bool {
	ca, cb := *a, *b
	ca.Entries, cb.Entries = nil, nil
	return ca.Hash() == cb.Hash()
}

func diffDirs(s cas.Store, dir string, a, b *cas.Inode, out *[]Change) error {
	old := map[string]cas.Entry{}
	for _, e := range a.Entries {
		old[e.Name] = e
	}
	for _, e := range b.Entries {
		p := path.Join(dir, e.Name)
		o, ok := old[e.Name]
		delete(old, e.Name)
		if ok && o.Object == e.Object && o.Ino == e.Ino {
			continue
		}
		nb, err := inode(s, e.Object)
		if err != nil {
			return err
		}
		if !ok {
			if err := added(s, p, b.Ino, e, nb, out); err != nil {
				return err
			}
			continue
		}
		na, err := inode(s, o.Object)
		if err != nil {
			return err
		}
		if o.Ino != e.Ino || na.Type() != nb.Type() {
			if err := removed(s, p, a.Ino, o, na, out); err != nil {
				return err
			}
			if err := added(s, p, b.Ino, e, nb, out); err != nil {
				return err
			}
			continue
		}
		if !nb.IsDir() || !sameAttrs(na, nb) {
			*out = append(*out, Change{Path: p, Kind: Modified, Ino: e.Ino, Dir: nb.IsDir(), Mode: nb.Mode, Old: o.Object, New: e.Object, par: b.Ino, name: e.Name})
		}
		if nb.IsDir() {
			if err := diffDirs(s, p, na, nb, out); err != nil {
				return err
			}
		}
	}
	for name, o := range old {
		na, err := inode(s, o.Object)
		if err != nil {
			return err
		}
		if err := removed(s, path.Join(dir, name), a.Ino, o, na, out); err != nil {
			return err
		}
	}
	return nil
}

func added(s cas.Store, p string, parent uint64, e cas.Entry, in *cas.Inode, out *[]Change) error {
	*out = append(*out, Change{Path: p, Kind: Added, Ino: e.Ino, Dir: in.IsDir(), Mode: in.Mode, New: e.Object, entry: true, par: parent, name: e.Name})
	if !in.IsDir() {
		return nil
	}
	return diffDirs(s, p, &cas.Inode{Ino: in.Ino}, in, out)
}

func removed(s cas.Store, p string, parent uint64, e cas.Entry, in *cas.Inode, out *[]Change) error {
	*out = append(*out, Change{Path: p, Kind: Removed, Ino: e.Ino, Dir: in.IsDir(), Mode: in.Mode, Old: e.Object, entry: true, par: parent, name: e.Name})
	if !in.IsDir() {
		return nil
	}
	return diffDirs(s, p, in, &cas.Inode{Ino: in.Ino}, out)
}

// Summary counts changes by kind, files and directories alike.
type Summary struct {
	Added    int `json:"added"`
	Modified int `json:"modified"`
	Removed  int `json:"removed"`
}

// Coalesce reports a name that was removed and added again as the same
// kind of file (an editor's write-to-temp-and-rename, sed -i) as modified,
// as git does. DiffRoots keeps them apart: the kernel's entry for the name
// must be invalidated.
func Coalesce(cs []Change) []Change {
	added := map[string]int{}
	for i, c := range cs {
		if c.Kind == Added {
			added[c.Path] = i
		}
	}
	out := make([]Change, 0, len(cs))
	drop := map[int]bool{}
	for _, c := range cs {
		if i, ok := added[c.Path]; ok && c.Kind == Removed && c.Mode&syscall.S_IFMT == cs[i].Mode&syscall.S_IFMT {
			m := cs[i]
			m.Kind, m.Old = Modified, c.Old
			out = append(out, m)
			drop[i] = true
			continue
		}
		out = append(out, c)
	}
	kept := out[:0]
	for _, c := range out {
		if i, ok := added[c.Path]; ok && c.Kind == Added && drop[i] {
			continue
		}
		kept = append(kept, c)
	}
	return kept
}

// Summarize counts a change list.
func Summarize(cs []Change) Summary {
	var s Summary
	for _, c := range cs {
		switch c.Kind {
		case Added:
			s.Added++
		case Removed:
			s.Removed++
		case Modified:
			if !c.Dir {
				s.Modified++
			}
		}
	}
	return s
}

// Blobs returns the objects on top, for layering one overlay over another.
func (o *Overlay) Blobs() []cas.Blob {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]cas.Blob, 0, len(o.m))
	for h, b := range o.m {
		out = append(out, cas.Blob{Hash: h, Data: b})
	}
	return out
}
