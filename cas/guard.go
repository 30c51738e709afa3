package cas

import (
	"cmp"
	"fmt"
	"slices"
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

// The closure over deltas.
//
// An object stored as a delta needs its base, and the base's base, down to
// a whole object. The mark that condemns objects knows trees, not how they
// are stored, so it may condemn a base (an old version of a directory no
// retained generation reaches) while a delta on it (the live version) is
// kept. Sweep therefore keeps every condemned object on the chain of an
// object it does not delete: at its start from the index (each delta entry
// names its base), and before each batch for what writers touched since
// (a writer that stores a new delta notes its base, asDelta).
// Bases kept this way go when the last delta that needs them does.
//
// Sweep deletes deltas before their bases (deepest first), so the index
// holds the whole chain of every object in it at every moment: a writer
// that finds an object (and deduplicates against it, or takes it as a
// base) finds its chain too, and noting the object before its batch keeps
// that chain (touched).

// closure keeps, out of cond, every object on the chain of a delta that
// is not in cond (or that a writer touched); it returns how many it kept.
type closure struct {
	deltas map[Hash]Loc  // every delta in the index
	cond   map[Hash]bool // condemned and not (yet) kept
	kept   map[Hash]bool
	seen   map[Hash]bool // touched objects already followed
}

func newClosure(deltas map[Hash]Loc, condemned []Hash) *closure {
	c := &closure{deltas: deltas, cond: make(map[Hash]bool, len(condemned)), kept: map[Hash]bool{}, seen: map[Hash]bool{}}
	for _, h := range condemned {
		c.cond[h] = true
	}
	for h, l := range deltas {
		if !c.cond[h] {
			c.keepChain(l.Base)
		}
	}
	return c
}

// keepChain keeps x and the chain below it, up to the first object that
// is not condemned (its own chain is kept by its own entry) or already
// kept.
func (c *closure) keepChain(x Hash) {
	for n := 0; c.cond[x] && n <= maxDepth; n++ {
		delete(c.cond, x)
		c.kept[x] = true
		next, ok := c.deltas[x]
		if !ok {
			return
		}
		x = next.Base
	}
}

// touched follows the chains of objects writers touched since the last
// call (the caller holds the guard's lock).
func (c *closure) touched(t map[Hash]struct{}) {
	for h := range t {
		if c.seen[h] {
			continue
		}
		c.seen[h] = true
		if l, ok := c.deltas[h]; ok {
			c.keepChain(l.Base)
		}
	}
}

// note records that a writer relies on h (it wrote or deduplicated it,
// or stores a delta against it).
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
	Deleted []Hash // deltas first, deepest first, then the rest in the order given
	Spared  int    // condemned objects a writer touched meanwhile
	Bases   int    // condemned objects kept as the base of a kept delta
}

// Sweep deletes the condemned objects in batches of SweepBatch, sparing
// those a writer touched since BeginSweep and those on the chain of a
// delta it keeps (see closure). Each batch is
// filtered and deleted under the guard's lock (a writer waits for one
// batch at most). pause, when not nil, runs between batches (to bound the
// collector's I/O rate). A batch that fails stops the sweep; the objects of
// the batches before it are gone.
func (b *Badger) Sweep(condemned []Hash, pause func()) (SweepResult, error) {
	var res SweepResult
	deltas, err := b.deltaLocs()
	if err != nil {
		return res, fmt.Errorf("sweep: %w", err)
	}
	c := newClosure(deltas, condemned)
	if len(deltas) > 0 {
		// A delta before its base (see closure).
		condemned = slices.Clone(condemned)
		slices.SortStableFunc(condemned, func(a, b Hash) int {
			return cmp.Compare(deltas[b].Depth, deltas[a].Depth)
		})
	}
	for len(condemned) > 0 {
		n := min(len(condemned), SweepBatch)
		batch := condemned[:n]
		condemned = condemned[n:]
		del, err := b.sweepBatch(batch, c, &res)
		res.Deleted = append(res.Deleted, del...)
		if err != nil {
			return res, fmt.Errorf("sweep: %w", err)
		}
		if pause != nil && len(condemned) > 0 {
			pause()
		}
	}
	return res, nil
}

func (b *Badger) sweepBatch(batch []Hash, c *closure, res *SweepResult) ([]Hash, error) {
	g := &b.guard
	g.mu.Lock()
	defer g.mu.Unlock()
	c.touched(g.touched)
	del := make([]Hash, 0, len(batch))
	for _, h := range batch {
		if _, ok := g.touched[h]; ok {
			res.Spared++
		} else if c.kept[h] {
			res.Bases++
		} else {
			del = append(del, h)
		}
	}
	if len(del) == 0 {
		return nil, nil
	}
	return del, b.Delete(del)
}
