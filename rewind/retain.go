package rewind

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// Retention: the store keeps every seq from a fine floor on, and below it
// the generations from a coarse floor on (their records and trees, not the
// records between them). Collect moves both floors up as the policy's
// windows say (policy.go), drops the records and generations below them,
// and collects the objects nothing retained names. A state is retained
// when it is at or past the fine floor and the nearest generation on its
// own path is too (an abandoned branch that forked below the floor goes
// with it), or when it is a generation at or past the coarse floor.

// metaDroppedGens counts the generations dropped so far, so that the ids
// of the retained ones (gN) never change.
const metaDroppedGens = "rewind.dropped-generations"

// metaFloors holds the last collection's Floors (JSON), for the message
// that refuses a state below them.
const metaFloors = "rewind.retention-floors"

// ErrNotRetained: the state asked for is older than what the store keeps.
var ErrNotRetained = fmt.Errorf("%w: not retained", ErrTarget)

// Floors are where retention stands and what set each floor.
type Floors struct {
	Seq     uint64    `json:"floor_seq"` // every seq from here on is kept
	SeqTime time.Time `json:"floor_time"`
	SeqBy   string    `json:"floor_by"`      // the window (or the pin) that set it
	Gen     uint64    `json:"gen_floor_seq"` // generations from here on are kept
	GenTime time.Time `json:"gen_floor_time"`
	GenBy   string    `json:"gen_floor_by"`
}

// RetainResult says what a collection did (or, dry, would do).
type RetainResult struct {
	Floor        uint64 `json:"floor_seq"`    // the first retained seq
	Generations  int    `json:"generations"`  // generations kept
	DroppedGens  int    `json:"dropped_gens"` // generations dropped
	Records      int    `json:"records"`      // records dropped
	Objects      int    `json:"objects"`      // objects dropped
	ObjectBytes  int64  `json:"object_bytes"` // their size
	KeptObjects  int    `json:"kept_objects"`
	AlreadyFloor uint64 `json:"previous_floor_seq"`
	// Added with live retention.
	Floors   Floors `json:"floors"`
	Spared   int    `json:"spared_objects"` // condemned objects a writer reused meanwhile
	Policy   string `json:"policy,omitempty"`
	TookNs   int64  `json:"took_ns"`
	Skipped  bool   `json:"skipped,omitempty"`           // the floors had not moved: no mark, no sweep
	DiskFrom int64  `json:"disk_bytes_before,omitempty"` // the store's size on disk (set by the daemon)
	DiskTo   int64  `json:"disk_bytes_after,omitempty"`
	// The segment log's compaction (cas Compact).
	Segments     int   `json:"segments_removed"`
	SegmentBytes int64 `json:"segment_bytes_freed"`
	MovedBytes   int64 `json:"moved_bytes"` // live bytes copied forward
}

// droppedGens returns how many generations earlier collections dropped
// and the seq they were all below ("N S"; a store of before live
// retention wrote "N" alone).
func droppedGens(j *journal.Journal) (n int, below uint64, err error) {
	b, err := j.GetMeta(metaDroppedGens)
	if err != nil || len(b) == 0 {
		return 0, 0, err
	}
	if _, err := fmt.Sscan(string(b), &n, &below); err != nil {
		if _, err := fmt.Sscan(string(b), &n); err != nil {
			return 0, 0, fmt.Errorf("store meta %s: %w", metaDroppedGens, err)
		}
	}
	return n, below, nil
}

// Retain keeps the newest keep generations of the current path and
// everything after the oldest of them, whatever the policy says; it must
// run on a store no daemon serves. extra names more trees to keep (the
// daemon's write-back base). With dry it only reports.
func Retain(j *journal.Journal, keep int, dry bool, extra ...cas.Hash) (*RetainResult, error) {
	if keep < 1 {
		return nil, fmt.Errorf("%w: keep at least one generation", ErrTarget)
	}
	return Collect(j, CollectOptions{Keep: keep, Dry: dry, Extra: extra})
}

// loadFloors returns the last collection's floors (zero before the first).
func loadFloors(j *journal.Journal) Floors {
	var f Floors
	if b, err := j.GetMeta(metaFloors); err == nil && len(b) > 0 {
		_ = json.Unmarshal(b, &f) // only for messages
	}
	return f
}

// isGeneration reports whether an indexed generation sits at seq.
func isGeneration(j *journal.Journal, seq uint64) (bool, error) {
	g := genIndexOf(j)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.loadLocked(j); err != nil {
		return false, err
	}
	_, ok := slices.BinarySearch(g.seqs, seq)
	return ok, nil
}

// checkRetained refuses a state whose replay would start below the floor:
// x at or past the floor with its generation base at or past it too, or a
// retained generation (base == x) below it.
func checkRetained(j *journal.Journal, x, base uint64) error {
	floor, err := j.Floor()
	if err != nil {
		return err
	}
	if floor <= 1 || base >= floor || (x < floor && base == x && base != 0) {
		return nil
	}
	return notRetained(j, x, floor)
}

// notRetained is the refusal of the state at x, naming the floor, when it
// was set and by what.
func notRetained(j *journal.Journal, x, floor uint64) error {
	f := loadFloors(j)
	msg := fmt.Sprintf("seq %d is below the retention floor: every seq is kept from seq %d", x, floor)
	if f.Seq == floor && !f.SeqTime.IsZero() {
		msg += fmt.Sprintf(" (%s, set by %s)", f.SeqTime.UTC().Format(time.DateTime+" UTC"), f.SeqBy)
	}
	if f.Gen != 0 && f.Gen < floor {
		msg += fmt.Sprintf(", and below it the generations from seq %d (set by %s)", f.Gen, f.GenBy)
	}
	return fmt.Errorf("%w: %s; see reynfs retention", ErrNotRetained, msg)
}

// unindexBelow removes the generation index entries below floor and adds
// their number to the dropped count, so the ids of the retained
// generations never shift.
func unindexBelow(j *journal.Journal, floor uint64) (int, error) {
	g := genIndexOf(j)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.loadLocked(j); err != nil {
		return 0, err
	}
	n := 0
	for _, s := range g.seqs {
		if s < floor {
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	dropped, _, err := droppedGens(j)
	if err != nil {
		return 0, err
	}
	// The count and the mark first: a crash before the entries go leaves
	// them below the mark, where loadLocked skips them, and the next
	// collection deletes them without counting them again.
	if err := j.SetMeta(metaDroppedGens, fmt.Appendf(nil, "%d %d", dropped+n, floor)); err != nil {
		return 0, err
	}
	err = j.DB().Update(func(txn *badger.Txn) error {
		for _, s := range g.seqs[:n] {
			if err := txn.Delete(genKey(s)); err != nil {
				return err
			}
		}
		return nil
	})
	g.loaded, g.seqs, g.recs = false, nil, nil // reloaded (with the new dropped count) on next use
	return n, err
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

// DroppedGenerations returns how many generations collections dropped
// from j and the seq they were all below: what keeps generation ids
// (gN) stable. A replica ships them (rewind/replica), so that gN names
// the same generation in a clone.
func DroppedGenerations(j *journal.Journal) (n int, below uint64, err error) {
	return droppedGens(j)
}

// SetDroppedGenerations records them in a store made from another's
// records (a clone), before its generations are first listed.
func SetDroppedGenerations(j *journal.Journal, n int, below uint64) error {
	if n < 0 {
		return fmt.Errorf("%w: %d dropped generations", ErrTarget, n)
	}
	g := genIndexOf(j)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := j.SetMeta(metaDroppedGens, fmt.Appendf(nil, "%d %d", n, below)); err != nil {
		return err
	}
	g.loaded, g.seqs, g.recs = false, nil, nil
	return nil
}
