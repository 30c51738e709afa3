package rewind

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// Generation kinds.
const (
	KindImport   = "import"
	KindTurn     = "turn"
	KindPlanStep = "plan-step"
	KindPhase    = "phase"
	KindManual   = "manual"
	KindAuto     = "auto"
	KindRewind   = "rewind"
)

// genPrefix keys the generation index: 'g' + big-endian seq, empty value.
// The index is a hint written after the generation record is durable; the
// journal is the truth, so a crash between the two only makes the next
// recovery replay a little more.
const genPrefix = 'g'

func genKey(seq uint64) []byte {
	k := make([]byte, 9)
	k[0] = genPrefix
	binary.BigEndian.PutUint64(k[1:], seq)
	return k
}

// Cut cuts a generation at the current seq: it journals buffered writes,
// computes the tree's Merkle root (incrementally: only what changed since
// the last cut), and appends the generation record with the new inode
// objects and every agent's current state, synced. The flush, the root
// and the append run under the live lock (locked.cut), so the cut is
// consistent: every record up to its seq and none after, for the tree and
// the agent states alike. The write-back of mapped pages comes before the
// lock and the sync after it.
func (rw *Rewinder) Cut(kind, label string) (*journal.Record, error) {
	return rw.CutBy(kind, label, agents.Origin{})
}

// CutBy is Cut on behalf of o, the process that asked for the checkpoint
// (a hook started inside a `reynfs run`, say): its pid, command, run and
// agent go on the generation record as a file operation's do, and o.Check
// runs under the live lock first, so a checkpoint asked by a run a rewind
// has cancelled is refused rather than cut on the new path.
func (rw *Rewinder) CutBy(kind, label string, o agents.Origin) (*journal.Record, error) {
	if err := rw.writeBack(); err != nil {
		return nil, fmt.Errorf("cut generation: %w", err)
	}
	var r *journal.Record
	err := rw.exclusive(func(x locked) (Invalidations, error) {
		var err error
		if o.Check != nil {
			if err := o.Check(); err != nil {
				return Invalidations{}, fmt.Errorf("cut generation: %w", err)
			}
		}
		r, err = x.cut(kind, label, o)
		return Invalidations{}, err // a cut changes nothing the kernel caches
	})
	if err != nil {
		return nil, err
	}
	// The record is indexed and reported only once it is stored: a
	// refused one (above) has no seq, and a failed commit fails Sync.
	if err := rw.J.Sync(); err != nil {
		return nil, fmt.Errorf("cut generation: %w", err)
	}
	if err := indexGeneration(rw.J, r.Seq); err != nil {
		return nil, err
	}
	return r, nil
}

func (x locked) cut(kind, label string, o agents.Origin) (*journal.Record, error) {
	live := x.live
	if err := live.FlushAllLocked(tree.Caller{}); err != nil {
		return nil, fmt.Errorf("cut generation: %w", err)
	}
	root, blobs, err := live.Tree().Root()
	if err != nil {
		return nil, fmt.Errorf("cut generation: %w", err)
	}
	r := &journal.Record{Op: journal.OpGeneration, Time: time.Now().UnixNano(),
		GenKind: kind, Label: label, Root: root, NextIno: live.NextInoLocked(), Agents: x.agents.Refs(),
		Pid: o.Pid, Comm: o.Comm, Run: o.Run, Agent: o.Agent}
	if err := enqueue(x.j, r, blobs); err != nil {
		return nil, fmt.Errorf("cut generation: %w", err)
	}
	return r, nil
}

// enqueue appends r with the objects it names and returns the journal's
// refusal (a record it cannot take, a journal that failed or is closed).
// A refused record was never stored and has no seq: the caller must not
// index it, report it or act as if it were durable. Tree.Root hands a
// tree's new objects out once, so when the journal still takes writes
// (the record itself was invalid) they are stored here, or a later
// generation would name objects nobody kept. A failed journal takes
// nothing more; the next open recovers from what it stored.
func enqueue(j *journal.Journal, r *journal.Record, blobs []cas.Blob) error {
	err := j.Enqueue(r, blobs).Refused()
	if err == nil {
		return nil
	}
	r.Seq = 0
	if errors.Is(err, journal.ErrInvalid) {
		if serr := StoreBlobs(j.Objects(), blobs); serr != nil {
			return fmt.Errorf("%s record: %w; %v", r.Op, err, serr)
		}
	}
	return fmt.Errorf("%s record: %w", r.Op, err)
}

// ObjectPutter returns the put of tree.RootTo for s: its PutBatch when it
// has one (one commit a batch), else a Put an object.
func ObjectPutter(s cas.Store) func([]cas.Blob) error {
	if bp, ok := s.(cas.BatchPutter); ok {
		return bp.PutBatch
	}
	return func(blobs []cas.Blob) error { return StoreBlobs(s, blobs) }
}

func indexGeneration(j *journal.Journal, seq uint64) error {
	g := genIndexOf(j)
	g.mu.Lock()
	defer g.mu.Unlock()
	err := j.DB().Update(func(txn *badger.Txn) error { return txn.Set(genKey(seq), nil) })
	if err != nil {
		return fmt.Errorf("index generation %d: %w", seq, err)
	}
	if g.loaded {
		g.addLocked(seq)
	}
	return nil
}

// Generations returns the seqs of the indexed generations, oldest first
// (a copy of genIndex's, which the caller may keep or change).
func Generations(j *journal.Journal) ([]uint64, error) {
	g := genIndexOf(j)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.loadLocked(j); err != nil {
		return nil, err
	}
	return slices.Clone(g.seqs), nil
}

// Reindex indexes the generation records past the newest indexed one: a
// crash between appending a generation and indexing it (a checkpoint, or
// a rewind killed after its swap) leaves one unindexed. Run at open; it
// also catches the restore index up (opsindex.go).
func Reindex(j *journal.Journal) error {
	gens, err := Generations(j)
	if err != nil {
		return err
	}
	var from uint64 = 1
	if len(gens) > 0 {
		from = gens[len(gens)-1] + 1
	}
	err = j.Iter(from, func(r *journal.Record) error {
		if r.Op != journal.OpGeneration {
			return nil
		}
		return indexGeneration(j, r.Seq)
	})
	if err != nil {
		return fmt.Errorf("reindex generations: %w", err)
	}
	return reindexRestores(j)
}

// AgentStates returns every agent's saved state at seq x (see
// agents.StatesAt), from the nearest generation on x's path.
func AgentStates(j *journal.Journal, x uint64) (map[string]cas.Hash, error) {
	gens, err := Generations(j)
	if err != nil {
		return nil, err
	}
	return agents.StatesAt(j, x, gens)
}
