package tree

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// wideTree builds dirs directories of files files each under the root
// (the shape of an imported project) without hashing it.
func wideTree(t testing.TB, dirs, files int) *Tree {
	t.Helper()
	tr, _ := newTestTree(t)
	next := uint64(RootIno + 1)
	for d := range dirs {
		dir := next
		next++
		mustApplyQuiet(t, tr, rMkdir(RootIno, fmt.Sprintf("d%03d", d), dir))
		for f := range files {
			mustApplyQuiet(t, tr, rCreate(dir, fmt.Sprintf("f%03d", f), next), benchData(next, d*files+f))
			next++
		}
	}
	return tr
}

// mustApplyQuiet is mustApply without the Check after every record.
func mustApplyQuiet(t testing.TB, tr *Tree, rs ...*journal.Record) {
	t.Helper()
	for _, r := range rs {
		if err := tr.Apply(r); err != nil {
			t.Fatalf("apply %v %q: %v", r.Op, r.Name, err)
		}
	}
}

// TestRootTo: the batched root is Root's, every object is handed over
// once, in batches of at most the size asked, and after the objects it
// names; the tree is left clean.
func TestRootTo(t *testing.T) {
	a, b := wideTree(t, 12, 30), wideTree(t, 12, 30)
	want, wantBlobs, err := a.Root()
	if err != nil {
		t.Fatal(err)
	}
	put := map[cas.Hash]bool{}
	batches := 0
	got, err := b.RootTo(func(bs []cas.Blob) error {
		batches++
		if len(bs) > 16 {
			t.Errorf("batch of %d objects, asked for 16", len(bs))
		}
		for _, bl := range bs {
			in, err := cas.DecodeInode(bl.Data)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range in.Entries {
				if !put[e.Object] {
					t.Errorf("object %s put before %q, which it names", bl.Hash.Short(), e.Name)
				}
			}
			put[bl.Hash] = true
		}
		return nil
	}, 16)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("RootTo %s, Root %s", got.Short(), want.Short())
	}
	if len(put) != len(wantBlobs) || batches < len(wantBlobs)/16 {
		t.Fatalf("%d objects in %d batches, Root made %d", len(put), batches, len(wantBlobs))
	}
	if _, blobs, err := b.Root(); err != nil || len(blobs) != 0 {
		t.Fatalf("Root after RootTo: %d new objects, %v", len(blobs), err)
	}
	// A new directory has no entry cache until its second hash.
	if ents, _ := b.Node(RootIno).entCache(); ents != nil {
		t.Fatalf("root directory cached %d entries after its first hash", len(ents))
	}
}

// TestRootToPutFails: put's error is RootTo's.
func TestRootToPutFails(t *testing.T) {
	tr := wideTree(t, 3, 10)
	boom := errors.New("disk full")
	calls := 0
	_, err := tr.RootTo(func([]cas.Blob) error { calls++; return boom }, 4)
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("RootTo = %v after %d puts, want %v after the first", err, calls, boom)
	}
}

// TestNodeSize: a million-file tree holds a million nodes; fields only
// some nodes need belong behind a pointer, not in every node (320 bytes a
// node before, a third of the daemon's heap at 300k files).
func TestNodeSize(t *testing.T) {
	if got := unsafe.Sizeof(Node{}); got > 224 {
		t.Fatalf("Node is %d bytes, want at most 224", got)
	}
}
