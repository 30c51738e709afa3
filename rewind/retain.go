package rewind

import (
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// Retention: the store keeps everything from a floor seq on. Retain moves
// the floor up to the oldest of the newest N generations on the current
// path, drops the records and generations below it, and collects the
// objects nothing retained names any more. A state is retained when it is
// at or past the floor and the nearest generation on its own path is too
// (an abandoned branch that forked below the floor goes with it).

// metaDroppedGens counts the generations dropped so far, so that the ids
// of the retained ones (gN) never change.
const metaDroppedGens = "rewind.dropped-generations"

// ErrNotRetained: the state asked for is older than what the store keeps.
var ErrNotRetained = fmt.Errorf("%w: older than what the store retains", ErrTarget)

// RetainResult says what Retain did (or, dry, would do).
type RetainResult struct {
	Floor        uint64 `json:"floor_seq"`    // the first retained seq
	Generations  int    `json:"generations"`  // generations kept
	DroppedGens  int    `json:"dropped_gens"` // generations dropped
	Records      int    `json:"records"`      // records dropped
	Objects      int    `json:"objects"`      // objects dropped
	ObjectBytes  int64  `json:"object_bytes"` // their size
	KeptObjects  int    `json:"kept_objects"`
	AlreadyFloor uint64 `json:"previous_floor_seq"`
}

// droppedGens returns how many generations earlier Retains dropped.
func droppedGens(j *journal.Journal) (int, error) {
	b, err := j.GetMeta(metaDroppedGens)
	if err != nil || len(b) == 0 {
		return 0, err
	}
	var n int
	if _, err := fmt.Sscan(string(b), &n); err != nil {
		return 0, fmt.Errorf("store meta %s: %w", metaDroppedGens, err)
	}
	return n, nil
}

// Retain keeps the newest keep generations of the current path and
// everything after the oldest of them; it must run on a store no daemon
// serves. extra names more trees to keep (the daemon's write-back base).
// With dry it only reports.
func Retain(j *journal.Journal, keep int, dry bool, extra ...cas.Hash) (*RetainResult, error) {
	if keep < 1 {
		return nil, fmt.Errorf("%w: keep at least one generation", ErrTarget)
	}
	gens, err := Timeline(j)
	if err != nil {
		return nil, err
	}
	path, err := j.Path()
	if err != nil {
		return nil, err
	}
	old, err := j.Floor()
	if err != nil {
		return nil, err
	}
	res := &RetainResult{Floor: old, AlreadyFloor: old}
	live := onLivePath(gens, path, j.Head())
	if len(live) > keep {
		res.Floor = live[len(live)-keep].Rec.Seq
	}
	var kept []*journal.Record
	for _, g := range gens {
		if g.Rec.Seq >= res.Floor {
			kept = append(kept, g.Rec)
		} else {
			res.DroppedGens++
		}
	}
	res.Generations = len(kept)

	// Mark what the retained generations and records name.
	marked := map[cas.Hash]bool{}
	roots := append([]cas.Hash(nil), extra...)
	for _, g := range kept {
		roots = append(roots, g.Root)
		for _, a := range g.Agents {
			marked[a.State] = true
		}
	}
	err = j.Iter(res.Floor, func(r *journal.Record) error {
		switch r.Op {
		case journal.OpData:
			for _, c := range r.Chunks {
				marked[c.Hash] = true
			}
		case journal.OpImport, journal.OpRestore:
			roots = append(roots, r.Root)
		case journal.OpAgentState:
			marked[r.Root] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = cas.Walk(j.Objects(), roots, func(h cas.Hash, _ *cas.Inode) error {
		marked[h] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("retain: mark: %w", err)
	}
	var drop []cas.Hash
	err = j.Objects().Each(func(h cas.Hash, size int64) error {
		if marked[h] {
			res.KeptObjects++
			return nil
		}
		drop = append(drop, h)
		res.ObjectBytes += size
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.Objects = len(drop)
	if dry {
		res.Records = countBelow(j, old, res.Floor)
		return res, nil
	}

	// Sweep: refuse the old states first (the floor), then drop their
	// generations, records and objects; a crash midway leaves garbage,
	// never a retained state that names a missing object.
	if res.Floor > old {
		// The dropped count changes with the index: reload the copy.
		defer genIndexOf(j).reload()
		dropped, err := droppedGens(j)
		if err != nil {
			return nil, err
		}
		if err := j.SetMeta(metaDroppedGens, fmt.Append(nil, dropped+res.DroppedGens)); err != nil {
			return nil, err
		}
		if res.Records, err = j.Truncate(res.Floor); err != nil {
			return nil, err
		}
		if err := unindexBelow(j, res.Floor); err != nil {
			return nil, err
		}
	}
	if err := j.Objects().Delete(drop); err != nil {
		return nil, err
	}
	// Give the space back. A run rewrites up to half a value-log file
	// into the active one: back that with blocks first, or stop (on a
	// full disk there is no room to compact; gc still completes).
	half := int(j.DB().Opts().ValueLogFileSize / 2)
	for j.Prepare(half) == nil && j.DB().RunValueLogGC(0.5) == nil {
	}
	return res, nil
}

func countBelow(j *journal.Journal, from, floor uint64) int {
	n := 0
	_ = j.Iter(from, func(r *journal.Record) error {
		if r.Seq >= floor {
			return errStop
		}
		if r.Op != journal.OpReset {
			n++
		}
		return nil
	})
	return n
}

// unindexBelow removes the generation index entries below floor.
func unindexBelow(j *journal.Journal, floor uint64) error {
	g := genIndexOf(j)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.loadLocked(j); err != nil {
		return err
	}
	err := j.DB().Update(func(txn *badger.Txn) error {
		for _, s := range g.seqs {
			if s < floor {
				if err := txn.Delete(genKey(s)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	g.loaded, g.seqs, g.recs = false, nil, nil // reloaded (with the new dropped count) on next use
	return err
}

// checkRetained refuses a state whose replay would start below the floor.
func checkRetained(j *journal.Journal, x, base uint64) error {
	floor, err := j.Floor()
	if err != nil {
		return err
	}
	if floor > 1 && (x < floor || base < floor) {
		return fmt.Errorf("%w: seq %d (the store keeps seq %d on; see reynfs gc)", ErrNotRetained, x, floor)
	}
	return nil
}

// GenerationID returns the id (the N of gN) of the generation at seq.
func GenerationID(j *journal.Journal, seq uint64) (int, error) {
	g := genIndexOf(j)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.loadLocked(j); err != nil {
		return 0, err
	}
	if i, found := slices.BinarySearch(g.seqs, seq); found {
		return g.dropped + i + 1, nil
	}
	return 0, fmt.Errorf("%w: no generation at seq %d", ErrTarget, seq)
}
