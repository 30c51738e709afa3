package rewind

import (
	"sync"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
)

// countingFresh counts how often each object reaches PutFresh and
// PutBatch.
type countingFresh struct {
	*cas.Memory
	mu     sync.Mutex
	fresh  map[cas.Hash]int
	looked int // blobs that went through PutBatch (looked up)
}

func (c *countingFresh) PutFresh(blobs []cas.Blob) error {
	c.mu.Lock()
	for _, b := range blobs {
		c.fresh[b.Hash]++
	}
	c.mu.Unlock()
	return c.Memory.PutFresh(blobs)
}

func (c *countingFresh) PutBatch(blobs []cas.Blob) error {
	c.mu.Lock()
	c.looked += len(blobs)
	c.mu.Unlock()
	return c.Memory.PutBatch(blobs)
}

// TestImportFreshStoresEachOnce: a Fresh import stores every chunk through
// PutFresh, each distinct one once although equal files are read by
// different readers, and builds the tree the ordinary import builds.
func TestImportFreshStoresEachOnce(t *testing.T) {
	src := t.TempDir()
	mixedTree(t, src)
	plain := cas.NewMemory()
	importTree(t, plain, src, 1, nil, nil, 0) // reads set the atimes once (relatime)
	want, wantRoot := importTree(t, plain, src, 1, nil, nil, 0)
	for _, workers := range []int{1, 4} {
		store := &countingFresh{Memory: cas.NewMemory(), fresh: map[cas.Hash]int{}}
		next := uint64(tree.RootIno + 1)
		im := &Importer{Store: store, Workers: workers, Fresh: true,
			Alloc: func() (uint64, error) { next++; return next - 1, nil }}
		got, err := im.Import(src)
		if err != nil {
			t.Fatalf("fresh import, %d workers: %v", workers, err)
		}
		root, _, err := got.Root()
		if err != nil {
			t.Fatal(err)
		}
		if root != wantRoot {
			t.Fatalf("fresh import, %d workers: root %s, the ordinary import's %s: %s", workers, root.Short(), wantRoot.Short(), describeDiff(want, got))
		}
		if store.looked != 0 {
			t.Errorf("fresh import, %d workers: %d blobs went through PutBatch", workers, store.looked)
		}
		same := cas.Sum([]byte("the same in every directory\n"))
		for h, n := range store.fresh {
			if n != 1 {
				t.Errorf("fresh import, %d workers: %s stored %d times", workers, h.Short(), n)
			}
		}
		if store.fresh[same] != 1 {
			t.Errorf("fresh import, %d workers: the chunk 12 files share was stored %d times, want 1", workers, store.fresh[same])
		}
	}
}

// TestCommitFreshImportReopen: a fresh import committed with
// CommitFreshImport (its inode objects stored in parallel batches before
// the record) reopens to the same tree, and fsck finds every object.
func TestCommitFreshImportReopen(t *testing.T) {
	src := t.TempDir()
	mixedTree(t, src)
	importTree(t, cas.NewMemory(), src, 1, nil, nil, 0) // settle the atimes
	db := t.TempDir()
	j := openJournal(t, db)
	next := uint64(tree.RootIno + 1)
	im := &Importer{Store: j.Objects(), Fresh: true, Alloc: func() (uint64, error) { next++; return next - 1, nil }}
	tr, err := im.Import(src)
	if err != nil {
		t.Fatal(err)
	}
	defer func(n int) { freshBatch = n }(freshBatch)
	freshBatch = 16 // several batches, stored in parallel
	g, stored, err := CommitFreshImport(j, tr, next, "test")
	if err != nil {
		t.Fatal(err)
	}
	root := g.Root
	if stored < 2*16 {
		t.Fatalf("stored %d objects: want several batches", stored)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openJournal(t, db)
	defer j.Close()
	rt, err := Reconstruct(j, j.Head())
	if err != nil {
		t.Fatalf("reconstruct after reopen: %v", err)
	}
	if h, _, err := rt.Root(); err != nil || h != g.Root || h != root {
		t.Fatalf("reopened root %s (%v), committed %s, imported %s", h.Short(), err, g.Root.Short(), root.Short())
	}
	rep, err := Fsck(j)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Damaged() {
		t.Fatalf("fsck after a fresh import: %+v", rep)
	}
}
