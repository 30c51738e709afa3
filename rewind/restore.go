package rewind

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
)

// RestoreResult says what a restore did.
type RestoreResult struct {
	Path     string        `json:"path"`
	From     uint64        `json:"from_seq"`
	Seq      uint64        `json:"seq"`      // the OpRestore record
	Inodes   uint64        `json:"inodes"`   // files, directories and links brought back
	Replaced bool          `json:"replaced"` // something was at the path and is gone
	Took     time.Duration `json:"took_ns"`
}

// Restore brings rel (a path relative to the workspace root) back from the
// state at seq x into the live tree, as one OpRestore record, without a
// rewind: the rest of the tree and every open handle stay as they are. The
// restored copy gets new inode numbers. It is synced when Restore returns.
// views is the name the mount gives its read-only history views in the
// root (mount --views-name; "" for none): a path under it is not in the
// tree, while a project's own entry of the default name is an ordinary one.
//
// The change runs in the exclusive section (locked.restore), like a
// rewind's swap, so the kernel hears of it only once the live lock is
// released (invariant 12), and the parent looked up is the one the
// record names.
func (rw *Rewinder) Restore(rel string, x uint64, views string) (*RestoreResult, error) {
	return rw.RestoreAs(rel, x, views, "")
}

// RestoreAs is Restore with a prefix for the record's label ("undo ID" or
// "redo ID" when an undo or redo restores; see ops.go).
func (rw *Rewinder) RestoreAs(rel string, x uint64, views, op string) (*RestoreResult, error) {
	start := time.Now()
	j := rw.J
	rel = path.Clean(strings.TrimPrefix(rel, "/"))
	if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("%w: restore needs a path below the workspace root (use rewind for the whole tree)", ErrTarget)
	}
	if first, _, _ := strings.Cut(rel, "/"); views != "" && first == views {
		return nil, fmt.Errorf("%w: %s is inside the read-only history views", ErrTarget, rel)
	}
	// Until the restore is recorded, only this pin keeps x's objects from
	// a collection (the live lock is taken later).
	release, err := Hold(j, x, 0)
	if err != nil {
		return nil, err
	}
	defer release()
	past, err := Reconstruct(j, x)
	if err != nil {
		return nil, err
	}
	n, err := lookupPath(past, rel)
	if err != nil {
		return nil, fmt.Errorf("%w: %s did not exist at seq %d", ErrTarget, rel, x)
	}
	// The past tree's inode objects may never have been stored (a state
	// between two generations): store those of the subtree, so the record
	// is committed with or after everything it names. That happens in the
	// exclusive section, which a collection's mark also takes: objects put
	// there are either in the live tree the mark sees or put after the
	// collection began (its sweep spares them, cas guard).
	_, blobs, err := past.Root()
	if err != nil {
		return nil, err
	}
	root, _ := n.Object()

	res := &RestoreResult{Path: rel, From: x}
	label := restoreLabel(res.Path, res.From)
	if op != "" {
		label = op + ": " + label
	}
	err = rw.exclusive(func(x locked) (Invalidations, error) {
		if err := putSubtree(j.Objects(), past, n, blobs); err != nil {
			return Invalidations{}, err
		}
		return x.restore(res, root, label)
	})
	if err != nil {
		return nil, err
	}
	if err := j.Sync(); err != nil {
		return nil, fmt.Errorf("restore %s: %w", rel, err)
	}
	_ = indexRestores(j, res.Seq) // a hint: Reindex and readers catch up past the mark
	res.Inodes, _ = tree.CountInodes(j.Objects(), root)
	res.Took = time.Since(start)
	return res, nil
}

// restore is Restore's exclusive section: it puts the stored subtree root
// at res.Path and returns what the kernel must forget (the entry, the
// inode it replaced, the parent's attributes).
func (x locked) restore(res *RestoreResult, root cas.Hash, label string) (Invalidations, error) {
	var none Invalidations
	dir, name := path.Split(res.Path)
	parent, err := lookupPath(x.live.Tree(), strings.TrimSuffix(dir, "/"))
	if err != nil || !parent.IsDir() {
		return none, fmt.Errorf("%w: %s: the parent directory does not exist now; restore it first", ErrTarget, res.Path)
	}
	_, old, seq, err := x.live.RestoreLocked(tree.Caller{Comm: "reynfs-restore"}, parent.Ino, name, root, label)
	if err != nil {
		return none, fmt.Errorf("restore %s: %w", res.Path, err)
	}
	res.Seq, res.Replaced = seq, old != 0
	inv := Invalidations{entries: []entryRef{{parent.Ino, name}}}
	if old != 0 {
		inv.inodes = append(inv.inodes, old)
	}
	inv.inodes = append(inv.inodes, parent.Ino)
	return inv, nil
}

// lookupPath resolves a slash-separated path from the root of t ("" and
// "." are the root).
func lookupPath(t *tree.Tree, rel string) (*tree.Node, error) {
	n := t.Node(tree.RootIno)
	for _, name := range strings.Split(rel, "/") {
		if name == "" || name == "." {
			continue
		}
		c, err := t.Lookup(n.Ino, name)
		if err != nil {
			return nil, err
		}
		n = c
	}
	return n, nil
}

// putSubtree stores the inode objects of n and everything below it.
func putSubtree(s cas.Store, t *tree.Tree, n *tree.Node, blobs []cas.Blob) error {
	want := map[cas.Hash]bool{}
	var walk func(n *tree.Node)
	walk = func(n *tree.Node) {
		h, _ := n.Object()
		if want[h] {
			return
		}
		want[h] = true
		for _, ino := range n.Entries() {
			walk(t.Node(ino))
		}
	}
	walk(n)
	var keep []cas.Blob
	for _, b := range blobs {
		if want[b.Hash] {
			keep = append(keep, b)
		}
	}
	return StoreBlobs(s, keep)
}
