package rewind

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// freshBatch is how many of a first import's inode objects one PutFresh
// stores: a frame of about a megabyte at 100 entries to a directory (a
// variable for tests).
var freshBatch = 4096

// CommitFreshImport is CommitImport for the first import into a new store
// (an Importer with Fresh set): the tree's objects, every one of them new,
// are stored in parallel batches without a lookup each (cas.FreshPutter),
// the log is synced, and only then is the import recorded, with no blob in
// its frame. At 100k files the record's own frame of 100k inode objects,
// each looked up and written by the journal's single committer, was the
// longest step after the walk.
//
// The order is invariant 1's: every object the root names is in a frame
// that is durable before the import record is appended. A kill -9 before
// the record leaves objects nobody names (the next mount imports again,
// writing them again; gc drops the copies) and no generation.
func CommitFreshImport(j *journal.Journal, root cas.Hash, blobs []cas.Blob, nextIno uint64, label string) (*journal.Record, error) {
	objs := j.Objects()
	if err := storeFresh(objs, blobs); err != nil {
		return nil, fmt.Errorf("commit import: %w", err)
	}
	if err := objs.SyncLog(); err != nil {
		return nil, fmt.Errorf("commit import: sync objects: %w", err)
	}
	return CommitImport(j, root, nil, nextIno, label)
}

// storeFresh stores blobs, known to be new, in batches of freshBatch on
// one goroutine per CPU: the compression and encoding of a frame run in
// parallel, its append and index write one at a time (cas.Badger.Commit).
func storeFresh(s cas.FreshPutter, blobs []cas.Blob) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan []cas.Blob)
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range next {
				if err := s.PutFresh(b); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for len(blobs) > 0 {
		n := min(len(blobs), freshBatch)
		next <- blobs[:n]
		blobs = blobs[n:]
	}
	close(next)
	wg.Wait()
	if first != nil {
		return fmt.Errorf("store objects: %w", first)
	}
	return nil
}
