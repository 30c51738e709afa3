package rewind

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// The collector. One collection:
//
//  1. starts a sweep in the store (cas guard: from here on, what writers
//     write or deduplicate is spared) and makes everything queued before
//     it durable;
//  2. under the live lock (which rewinds and restores hold while they
//     check and use their target) and the pins' lock: computes the floors
//     (floors.go), records them (RaiseFloor: from here on the old states
//     are refused), unindexes the dropped generations, and copies the hashes
//     the live tree names (nodes not journaled into a generation yet, and
//     unlinked files still open); then waits for the records enqueued
//     before the section to commit. A record the mark does not read was
//     enqueued after the section, under the live lock, and names objects
//     the copied live tree names, or that its writer wrote, deduplicated
//     or put after the sweep began (spared);
//  3. without a lock: drops the records below the fine floor but the
//     retained generations' and the resets (journal Truncate);
//  4. marks from every retained root: the retained generations' trees and
//     agent states, the records from the fine floor on (chunks, imported
//     and restored trees, agent states), the live tree's hashes and the
//     extra roots (the write-back base);
//  5. sweeps the rest in small locked batches (cas Sweep), pausing
//     between them, and gives the space back: the segments that are now
//     mostly garbage are rewritten and removed (cas Compact), and Badger's
//     value log (records of more than a KiB) is collected.
//
// A crash at any step leaves garbage, never a retained state that names a
// missing object: floors go up before anything below them goes, and
// objects go last.

// CollectOptions says what a collection keeps.
type CollectOptions struct {
	// Keep, when > 0, keeps the newest Keep generations of the current
	// path and everything after the oldest of them instead of the store's
	// policy (gc --keep).
	Keep int
	// Dry computes what would go and changes nothing.
	Dry bool
	// Extra names more trees to keep (the daemon's write-back base).
	Extra []cas.Hash
	// Holds keep records from their seqs on (remotes that have not
	// received them: replica.FloorHolds).
	Holds []RecordHold
	// Now is the windows' clock (zero: time.Now).
	Now time.Time
	// Pause runs between two sweep batches (nil: none).
	Pause func()
	// IfMoved skips the mark and the sweep when the floors stand where
	// the last collection left them (the daemon's periodic run: a mark
	// reads every retained tree, and nothing became garbage meanwhile).
	IfMoved bool
	// step, when set, is called after each step that changes the store
	// (crash tests kill the process there).
	step func(name string)
}

func (o *CollectOptions) at(name string) {
	if o.step != nil {
		o.step(name)
	}
}

// Collect runs a collection on a store no daemon serves.
func Collect(j *journal.Journal, o CollectOptions) (*RetainResult, error) {
	return collect(j, nil, o)
}

// Collect runs a collection on the mounted store rw serves; writers go on
// meanwhile (the live lock is held only to set the floors and copy the
// live tree's hashes).
func (rw *Rewinder) Collect(o CollectOptions) (*RetainResult, error) {
	return collect(rw.J, rw, o)
}

func collect(j *journal.Journal, rw *Rewinder, o CollectOptions) (*RetainResult, error) {
	start := time.Now()
	if o.Now.IsZero() {
		o.Now = start
	}
	objs := j.Objects()
	if !o.Dry {
		objs.BeginSweep()
		defer objs.EndSweep()
	}
	if err := j.Sync(); err != nil {
		return nil, fmt.Errorf("collect: %w", err)
	}
	old, err := j.Floor()
	if err != nil {
		return nil, err
	}
	res := &RetainResult{AlreadyFloor: old}
	prev := loadFloors(j)
	var fl Floors
	var kept []Gen
	var liveHashes []cas.Hash
	section := func() error {
		r := retentionOf(j)
		r.mu.Lock()
		defer r.mu.Unlock()
		var err error
		if fl, err = computeFloors(j, o, r.pinnedLocked(o.Now)); err != nil {
			return err
		}
		if o.Dry {
			return nil
		}
		if err := j.RaiseFloor(fl.Seq); err != nil {
			return err
		}
		o.at("floor raised")
		b, _ := json.Marshal(fl)
		if err := j.SetMeta(metaFloors, b); err != nil {
			return err
		}
		res.DroppedGens, err = unindexBelow(j, fl.Gen)
		return err
	}
	if rw != nil && rw.Live != nil {
		err = rw.exclusive(func(x locked) (Invalidations, error) {
			x.live.EachNodeLocked(func(n *tree.Node) {
				if h, ok := n.Object(); ok {
					liveHashes = append(liveHashes, h)
				}
				liveHashes = append(liveHashes, n.ChunkHashes()...)
			})
			return Invalidations{}, section()
		})
	} else {
		err = section()
	}
	if err != nil {
		return nil, fmt.Errorf("collect: %w", err)
	}
	o.at("floors")
	// The records enqueued before the section (a cut whose tree has changed
	// since) must be read by the mark: wait for them.
	if err := j.Sync(); err != nil {
		return nil, fmt.Errorf("collect: %w", err)
	}
	res.Floor, res.Floors = fl.Seq, fl
	if o.IfMoved && o.Keep == 0 && fl.Seq == old && prev.Seq == old && fl.Gen == prev.Gen {
		// Objects become garbage when the floors pass the records and
		// generations that named them: nothing new to collect.
		res.Skipped = true
		res.TookNs = int64(time.Since(start))
		return res, nil
	}
	gens, err := Timeline(j)
	if err != nil {
		return nil, err
	}
	var keep []uint64
	for _, g := range gens {
		if g.Rec.Seq < fl.Gen {
			if o.Dry {
				res.DroppedGens++
			}
			continue
		}
		kept = append(kept, g)
		if g.Rec.Seq < fl.Seq {
			keep = append(keep, g.Rec.Seq)
		}
	}
	res.Generations = len(kept)
	if o.Dry {
		res.Records = countBelow(j, fl.Seq, keep)
	} else if res.Records, err = j.Truncate(fl.Seq, keep...); err != nil {
		return nil, fmt.Errorf("collect: %w", err)
	}
	o.at("truncated")

	marked, err := mark(j, fl.Seq, kept, liveHashes, o.Extra)
	if err != nil {
		return nil, err
	}
	var condemned []cas.Hash
	sizes := map[cas.Hash]int64{}
	err = objs.Each(func(h cas.Hash, size int64) error {
		if marked[h] {
			res.KeptObjects++
			return nil
		}
		condemned = append(condemned, h)
		sizes[h] = size
		return nil
	})
	if err != nil {
		return nil, err
	}
	if o.Dry {
		res.Objects = len(condemned)
		for _, s := range sizes {
			res.ObjectBytes += s
		}
		res.TookNs = int64(time.Since(start))
		return res, nil
	}
	pause := func() {
		o.at("swept a batch")
		if o.Pause != nil {
			o.Pause()
		}
	}
	sw, err := objs.Sweep(condemned, pause)
	res.Objects, res.Spared = len(sw.Deleted), sw.Spared
	res.KeptObjects += sw.Spared + sw.Bases // a kept delta keeps its chain (cas Sweep)
	for _, h := range sw.Deleted {
		res.ObjectBytes += sizes[h]
	}
	if err != nil {
		return res, fmt.Errorf("collect: %w", err)
	}
	o.at("swept")
	// Give the space back: segments that are mostly garbage now are
	// rewritten and removed (a store of format 1 has none).
	cr, err := objs.Compact(o.step, o.Pause)
	res.Segments, res.SegmentBytes, res.MovedBytes = cr.Segments, cr.FreedBytes, cr.MovedBytes
	if err != nil {
		return res, fmt.Errorf("collect: %w", err)
	}
	if res.ObjectBytes >= 1<<20 && sealedValueLogs(j.DB().Opts().Dir) {
		// Give the space back. A run rewrites up to half a value-log file
		// into the active one: back that with blocks first, or stop (on a
		// full disk there is no room to compact; the collection still
		// completes). Bounded: a few files per collection.
		half := int(j.DB().Opts().ValueLogFileSize / 2)
		for range 16 {
			if j.Prepare(half) != nil || j.DB().RunValueLogGC(0.5) != nil {
				break
			}
			o.at("value-log GC")
			if o.Pause != nil {
				o.Pause()
			}
		}
	}
	res.TookNs = int64(time.Since(start))
	return res, nil
}

// sealedValueLogs reports whether Badger's directory holds more than one
// value-log file: a value-log GC run never rewrites the newest one, so with
// one there is nothing to gain, and the blocks it backs first would only
// grow the store.
func sealedValueLogs(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	return len(m) > 1
}

// mark returns every object a retained state needs.
func mark(j *journal.Journal, floor uint64, kept []Gen, live, extra []cas.Hash) (map[cas.Hash]bool, error) {
	marked := make(map[cas.Hash]bool, len(live))
	for _, h := range live {
		marked[h] = true
	}
	roots := append([]cas.Hash(nil), extra...)
	for _, g := range kept {
		roots = append(roots, g.Rec.Root)
		for _, a := range g.Rec.Agents {
			marked[a.State] = true
		}
	}
	err := j.Iter(floor, func(r *journal.Record) error {
		switch r.Op {
		case journal.OpData:
			for _, c := range r.Chunks {
				marked[c.Hash] = true
			}
		case journal.OpImport, journal.OpRestore:
			roots = append(roots, r.Root)
		case journal.OpAgentState:
			marked[r.Root] = true
		case journal.OpGeneration:
			roots = append(roots, r.Root)
			for _, a := range r.Agents {
				marked[a.State] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("collect: mark: %w", err)
	}
	err = cas.Walk(j.Objects(), roots, func(h cas.Hash, _ *cas.Inode) error {
		marked[h] = true
		return nil
	})
	if err != nil && !errors.Is(err, cas.ErrNotFound) {
		return nil, fmt.Errorf("collect: mark: %w", err)
	}
	if err != nil {
		// A retained root names a missing object: sweeping now could only
		// make it worse. fsck says what is damaged.
		return nil, fmt.Errorf("collect: mark: %w (run reynfs fsck; nothing was swept)", err)
	}
	return marked, nil
}

// countBelow counts the records Truncate(floor, keep...) would drop.
func countBelow(j *journal.Journal, floor uint64, keep []uint64) int {
	skip := map[uint64]bool{}
	for _, s := range keep {
		skip[s] = true
	}
	n := 0
	_ = j.Iter(1, func(r *journal.Record) error {
		if r.Seq >= floor {
			return errStop
		}
		if r.Op != journal.OpReset && !skip[r.Seq] {
			n++
		}
		return nil
	})
	return n
}
