package daemon

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// pathNamer names the paths journal records touched, for 'log --wal'
// (people expect "src/a.go", not "inode 4711"). Records carry inode
// numbers, and a name only for the entry they create, remove or rename,
// so the namer replays them, in order, on the tree of the generation
// they follow, and asks that tree just before each record. An inode that
// the segment did not create is found by one walk of the tree, made on
// first need and again after a rename or removal changed the paths.
type pathNamer struct {
	j    *journal.Journal
	t    *tree.Tree
	from uint64            // the generation's seq: records descending from it are named
	of   map[uint64]string // inode -> a path of it; nil until walked
	dead bool              // replay failed: name nothing more
}

func newPathNamer(j *journal.Journal, gen uint64) (*pathNamer, error) {
	t, err := rewind.Reconstruct(j, gen)
	if err != nil {
		return nil, err
	}
	return &pathNamer{j: j, t: t, from: gen}, nil
}

// name returns the paths r touched (nil: none known) and moves the tree
// past r. Records on other branches than the generation's are not named.
func (n *pathNamer) name(p *journal.Path, r *journal.Record) []string {
	if n.dead || !p.OnPath(n.from, r.Seq) {
		return nil
	}
	var out []string
	switch r.Op {
	case journal.OpCreate, journal.OpMkdir, journal.OpSymlink, journal.OpLink,
		journal.OpUnlink, journal.OpRmdir, journal.OpRestore:
		out = []string{n.join(r.Parent, r.Name)}
	case journal.OpRename:
		out = []string{n.join(r.Parent, r.Name), n.join(r.NewParent, r.NewName)}
	case journal.OpData, journal.OpSetattr, journal.OpSetxattr, journal.OpRemovexattr:
		if q := n.pathOf(r.Ino); q != "" {
			out = []string{q}
		}
	}
	n.apply(r)
	return out
}

// apply moves the tree past r, as reconstruction does.
func (n *pathNamer) apply(r *journal.Record) {
	var err error
	switch r.Op {
	case journal.OpImport:
		if _, _, err = n.t.Root(); err == nil { // Graft starts from a clean tree
			err = n.t.Graft(r.Root)
		}
		n.of = nil
	case journal.OpReset:
		if r.ResetTo < n.from {
			n.dead = true // the records after it no longer follow the generation
			return
		}
		n.t, err = rewind.Reconstruct(n.j, r.ResetTo)
		n.of = nil
	default:
		err = n.t.Apply(r)
		switch r.Op {
		case journal.OpRename, journal.OpUnlink, journal.OpRmdir, journal.OpRestore:
			n.of = nil // paths below changed
		case journal.OpCreate, journal.OpMkdir, journal.OpSymlink, journal.OpLink:
			if n.of != nil {
				n.of[r.Ino] = n.join(r.Parent, r.Name)
			}
		}
	}
	if err != nil {
		n.dead = true
	}
}

// join is the path of entry name in directory dir.
func (n *pathNamer) join(dir uint64, name string) string {
	d := n.pathOf(dir)
	if d == "" {
		return name
	}
	return d + "/" + name
}

// pathOf is a path of inode ino in the tree ("" for the root, or when it
// has none: an open-unlinked file).
func (n *pathNamer) pathOf(ino uint64) string {
	if ino == tree.RootIno {
		return ""
	}
	if n.of == nil {
		n.of = map[uint64]string{}
		n.walk(tree.RootIno, "")
	}
	if q, ok := n.of[ino]; ok {
		return q
	}
	return fmt.Sprintf("(inode %d)", ino)
}

func (n *pathNamer) walk(dir uint64, prefix string) {
	ents, err := n.t.Readdir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		q := path.Join(prefix, e.Name)
		if _, seen := n.of[e.Ino]; !seen {
			n.of[e.Ino] = q
		}
		if e.Mode&0o170000 == 0o040000 {
			n.walk(e.Ino, q)
		}
	}
}

// importRoot is the root of the newest import record at or before seq on
// seq's path: what the store's first generation is counted against.
func importRoot(j *journal.Journal, p *journal.Path, seq uint64) (cas.Hash, bool, error) {
	var root cas.Hash
	found := false
	err := j.Iter(1, func(r *journal.Record) error {
		if r.Seq >= seq {
			return errDone
		}
		if r.Op == journal.OpImport && p.OnPath(r.Seq, seq) {
			root, found = r.Root, true
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDone) {
		return cas.Hash{}, false, err
	}
	return root, found, nil
}

// describePaths says what a record did with the paths it touched.
func describePaths(r *journal.Record, paths []string) string {
	switch r.Op {
	case journal.OpRename:
		return fmt.Sprintf("%s -> %s", paths[0], paths[1])
	case journal.OpSymlink:
		return fmt.Sprintf("%s -> %q", paths[0], r.Target)
	case journal.OpData:
		kind := [...]string{"write", "truncate", "fallocate", "copy"}[min(int(r.Kind), 3)]
		return fmt.Sprintf("%s %s: size %d", kind, paths[0], r.Size)
	case journal.OpSetattr:
		return fmt.Sprintf("%s mode %o uid %d gid %d", paths[0], r.Mode, r.Uid, r.Gid)
	case journal.OpSetxattr, journal.OpRemovexattr:
		return fmt.Sprintf("%s %s", paths[0], r.XName)
	case journal.OpRestore:
		return fmt.Sprintf("%s from %s", paths[0], r.Label)
	}
	return strings.Join(paths, " ")
}
