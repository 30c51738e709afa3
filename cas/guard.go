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
// So the store itself remembers every hash a writer touched, written or
// deduplicated, and the sweep never deletes one of those. The memory is an
// epoch pair: BeginSweep starts a new epoch, and the sweep spares what was
// touched in the current one or the one before, so a writer that looked an
// object up just before the collection began (a restore that stored its
// subtree and has yet to append its record) is covered as well as one that
// does it while the sweep runs. The collector must make everything queued
// before BeginSweep durable before it marks (journal Sync): then every
// record it does not read was committed after BeginSweep, and every object
// such a record names was noted.
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
	cur      map[Hash]struct{}
	prev     map[Hash]struct{}
}

// note records that a writer relies on h (it wrote or deduplicated it).
func (g *guard) note(h Hash) {
	g.mu.Lock()
	if g.tracking {
		g.cur[h] = struct{}{}
	}
	g.mu.Unlock()
}

// spared reports whether a sweep must keep h. Caller holds g.mu.
func (g *guard) sparedLocked(h Hash) bool {
	if _, ok := g.cur[h]; ok {
		return true
	}
	_, ok := g.prev[h]
	return ok
}

// TrackWrites makes the store remember the hashes writers touch from now
// on, so that a collection that begins later spares what a writer began
// to rely on before it (see the sweep guard). A daemon that collects while
// it serves calls it once before it takes writes; the memory is bounded by
// what is written between two collections.
func (b *Badger) TrackWrites() {
	g := &b.guard
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.tracking {
		g.tracking = true
		g.cur = map[Hash]struct{}{}
	}
}

// BeginSweep starts a collection's epoch: from here until the next
// BeginSweep, Sweep spares every object a writer touched since the
// previous BeginSweep (or TrackWrites). Call it before marking.
func (b *Badger) BeginSweep() {
	g := &b.guard
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.tracking {
		g.tracking = true
		g.cur = map[Hash]struct{}{}
	}
	g.prev, g.cur = g.cur, map[Hash]struct{}{}
}

// SweepResult says what a Sweep deleted and what the guard spared.
type SweepResult struct {
	Deleted []Hash // in the order given
	Spared  int    // condemned objects a writer touched meanwhile
}

// Sweep deletes the condemned objects in batches of SweepBatch, sparing
// those a writer touched since the previous BeginSweep. Each batch is
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
		if !g.sparedLocked(h) {
			del = append(del, h)
		}
	}
	if len(del) == 0 {
		return nil, nil
	}
	return del, b.Delete(del)
}
