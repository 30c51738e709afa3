package rewind

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// freshBatch is how many of a first import's inode objects one PutFresh
// stores: a frame of about a megabyte at 100 entries to a directory (a
// variable for tests).
var freshBatch = 4096

// CommitFreshImport is CommitImport for the first import into a new store
// (an Importer with Fresh set) of tree t: the tree's objects, every one of
// them new, are stored as Root makes them (t.RootTo, a batch at a time,
// not a million objects held at once), in parallel batches without a
// lookup each (cas.FreshPutter); the log is synced, and only then is the
// import recorded, with no blob in its frame. At 100k files the record's
// own frame of 100k inode objects, each looked up and written by the
// journal's single committer, was the longest step after the walk. It
// also returns how many objects it stored.
//
// The order is invariant 1's: every object the root names is in a frame
// that is durable before the import record is appended. A kill -9 before
// the record leaves objects nobody names (the next mount imports again,
// writing them again; gc drops the copies) and no generation. When it
// fails, t holds nodes marked clean whose objects may not be stored: the
// caller drops it, as after a failed import.
func CommitFreshImport(j *journal.Journal, t *tree.Tree, nextIno uint64, label string) (*journal.Record, int, error) {
	objs := j.Objects()
	fs := newFreshStorer(objs)
	n := 0
	root, err := t.RootTo(func(bs []cas.Blob) error {
		n += len(bs)
		return fs.put(slices.Clone(bs)) // RootTo reuses its batch
	}, freshBatch)
	if werr := fs.wait(); werr != nil {
		err = werr // what put returned is this error too
	}
	if err != nil {
		return nil, n, fmt.Errorf("commit import: %w", err)
	}
	if err := objs.SyncLog(); err != nil {
		return nil, n, fmt.Errorf("commit import: sync objects: %w", err)
	}
	g, err := CommitImport(j, root, nil, nextIno, label)
	return g, n, err
}

// freshStorer stores batches of blobs, known to be new, on one goroutine
// per CPU: the compression and encoding of a frame run in parallel, its
// append and index write one at a time (cas.Badger.Commit).
type freshStorer struct {
	s     cas.FreshPutter
	wg    sync.WaitGroup
	mu    sync.Mutex
	first error
	next  chan []cas.Blob
}

func newFreshStorer(s cas.FreshPutter) *freshStorer {
	f := &freshStorer{s: s, next: make(chan []cas.Blob)}
	for range runtime.GOMAXPROCS(0) {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for b := range f.next {
				if err := f.s.PutFresh(b); err != nil {
					f.mu.Lock()
					f.first = cmp.Or(f.first, err)
					f.mu.Unlock()
				}
			}
		}()
	}
	return f
}

// put hands a batch to a free goroutine (waiting for one), or returns the
// first error a batch met.
func (f *freshStorer) put(b []cas.Blob) error {
	f.mu.Lock()
	err := f.first
	f.mu.Unlock()
	if err != nil {
		return err
	}
	f.next <- b
	return nil
}

// wait waits for every batch handed over and returns the first error.
func (f *freshStorer) wait() error {
	close(f.next)
	f.wg.Wait()
	if f.first != nil {
		return fmt.Errorf("store objects: %w", f.first)
	}
	return nil
}
