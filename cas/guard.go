package cas

import (
	"fmt"
	"sync"
)

// The sweep guard.
//
// A collector marks what the retained roots reach and deletes the rest. A
// writer running at the same time can rely on an object the mark did not
// see: a commit whose AddToBatch (or a Put) finds the object already
// stored writes nothing and names it in a record the mark never read. If
// the sweep then deletes the object, that record names a missing object
// (invariant 1 broken by deduplication, not by the writer).
//
// So while a collection runs (BeginSweep to EndSweep) the store remembers
// every hash a writer touches, written or deduplicated, and the sweep
// never deletes one of those. What a writer touched before BeginSweep is
// the collector's to find: it makes everything queued before it durable
// and marks from the committed records and from the live tree, which it
// copies under the lock every mutation takes (rewind/collect.go).
//
// The check and the delete of one batch happen under the guard's lock, and
// noting takes the same lock, so a writer either noted the object before
// the batch was filtered (spared) or looks it up after the delete is
// committed (finds it missing and writes it again). Batches are small, so
// a writer waits at most for one batch's commit.

// SweepBatch is how many objects one locked delete removes.
const SweepBatch = 256

type guard struct {
	mu       sync.Mutex
	tracking bool
	touched  map[Hash]struct{}
}

// note records that a writer relies on h (it wrote or deduplicated it).
func (g *guard) note(h Hash) {
	g.mu.Lock()
	if g.tracking {
		g.touched[h] = struct{}{}
	}
	g.mu.Unlock()
}

// BeginSweep starts a collection: until EndSweep, the store remembers the
// hashes writers touch, and Sweep spares them. Call it before marking.
func (b *Badger) BeginSweep() {
	g := &b.guard
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tracking, g.touched = true, map[Hash]struct{}{}
}

// EndSweep ends the collection BeginSweep began and forgets the hashes.
func (b *Badger) EndSweep() {
	g := &b.guard
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tracking, g.touched = false, nil
}

// SweepResult says what a Sweep deleted and what the guard spared.
type SweepResult struct {
	Deleted []Hash // in the order given
	Spared  int    // condemned objects a writer touched meanwhile
}

// Sweep deletes the condemned objects in batches of SweepBatch, sparing
// those a writer touched since BeginSweep. Each batch is
// filtered and deleted under the guard's lock (a writer waits for one
// batch at most). pause, when not nil, runs between batches (to bound the
// collector's I/O rate). A batch that fails stops the sweep; the objects of
// the batches before it are gone.
func (b *Badger) Sweep(condemned []Hash, pause func()) (SweepResult, error) {
	var res SweepResult
	for len(condemned) > 0 {
		n := min(len(condemned), SweepBatch)
		batch := condemned[:n]
		condemned = condemned[n:]
		del, err := b.sweepBatch(batch)
		res.Deleted = append(res.Deleted, del...)
		res.Spared += len(batch) - len(del)
		if err != nil {
			return res, fmt.Errorf("sweep: %w", err)
		}
		if pause != nil && len(condemned) > 0 {
			pause()
		}
	}
	return res, nil
}

func (b *Badger) sweepBatch(batch []Hash) ([]Hash, error) {
	g := &b.guard
	g.mu.Lock()
	defer g.mu.Unlock()
	del := make([]Hash, 0, len(batch))
	for _, h := range batch {
		if _, ok := g.touched[h]; !ok {
			del = append(del, h)
		}
	}
	if len(del) == 0 {
		return nil, nil
	}
	return del, b.Delete(del)
}
