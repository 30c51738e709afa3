package rewind

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// Invalidator is what a rewind needs of the mounted file system: telling
// the kernel to drop cached attributes, pages and directory entries. It is
// called after the swap, outside every lock and every FUSE handler.
type Invalidator interface {
	InvalidateInode(ino uint64)
	InvalidateEntry(parent uint64, name string)
}

// Result says what a rewind did (or, dry, would do).
type Result struct {
	Reset   uint64        `json:"reset_seq,omitempty"` // the reset record; 0 on a dry run
	Target  uint64        `json:"target_seq"`
	Root    cas.Hash      `json:"-"`
	Changes []Change      `json:"changes"`
	Summary Summary       `json:"summary"`
	Took    time.Duration `json:"took_ns"`
	// Phases says where the time went (flush, root, reconstruct, diff,
	// reset, swap, index, invalidate), for people tuning it.
	Phases []Phase `json:"phases,omitempty"`
}

// Phase is one timed step of a rewind.
type Phase struct {
	Name string        `json:"name"`
	Took time.Duration `json:"took_ns"`
}

// FaultEnv names the environment variable that makes the daemon die at a
// chosen point of a rewind (tests use it): after-reset, mid-swap, after-swap.
const FaultEnv = "REYNFS_FAULT"

func fault(point string) {
	if os.Getenv(FaultEnv) == point {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // wait for the signal
	}
}

// Rewinder serializes rewinds of one live tree.
type Rewinder struct {
	mu     sync.Mutex
	J      *journal.Journal
	Live   *tree.Live
	Inv    Invalidator      // nil when nothing is mounted
	Agents *agents.Registry // the agents' current states; nil: none saved yet
}

func (rw *Rewinder) agents() *agents.Registry {
	if rw.Agents == nil {
		rw.Agents = agents.NewRegistry(nil)
	}
	return rw.Agents
}

// Rewind moves the live workspace to the state at seq target: it journals
// buffered writes, appends and syncs the reset record {target, supersedes}
// before anything else changes, reconstructs the target state, swaps it
// in, cuts a generation of kind rewind, and then invalidates the kernel's
// caches of what changed. Open handles from before become stale.
func (rw *Rewinder) Rewind(target uint64, dry bool) (*Result, error) {
	if !rw.mu.TryLock() {
		return nil, fmt.Errorf("%w: another rewind is running", ErrTarget)
	}
	defer rw.mu.Unlock()
	start := time.Now()
	j, live := rw.J, rw.Live
	res := &Result{Target: target}
	last := start
	lap := func(name string) {
		now := time.Now()
		res.Phases = append(res.Phases, Phase{name, now.Sub(last)})
		last = now
	}

	live.Lock()
	if err := live.FlushAllLocked(tree.Caller{Comm: "reynfs-rewind"}); err != nil {
		live.Unlock()
		return nil, err
	}
	if err := j.Sync(); err != nil { // replay reads committed records only
		live.Unlock()
		return nil, err
	}
	lap("flush")
	oldRoot, oldBlobs, err := live.Tree().Root()
	if err != nil {
		live.Unlock()
		return nil, err
	}
	lap("root")
	nt, err := ReconstructFrom(j, target, live.Tree())
	if err != nil {
		live.Unlock()
		return nil, err
	}
	newRoot, newBlobs, err := nt.Root()
	if err != nil {
		live.Unlock()
		return nil, err
	}
	lap("reconstruct")
	gens, err := Generations(j)
	if err != nil {
		live.Unlock()
		return nil, err
	}
	states, err := agents.StatesAt(j, target, gens)
	if err != nil {
		live.Unlock()
		return nil, err
	}
	ov := NewOverlay(j.Objects(), oldBlobs, newBlobs)
	changes, err := DiffRoots(ov, oldRoot, newRoot)
	if err != nil {
		live.Unlock()
		return nil, err
	}
	res.Changes = Coalesce(changes)
	if res.Changes == nil {
		res.Changes = []Change{}
	}
	res.Summary, res.Root = Summarize(res.Changes), newRoot
	lap("diff")
	if dry {
		// Root hands out the live tree's new objects once: keep them, or
		// the next generation would name objects nobody stored.
		err := putBlobs(j.Objects(), oldBlobs)
		live.Unlock()
		if err != nil {
			return nil, err
		}
		res.Took = time.Since(start)
		return res, nil
	}
	path, err := j.Path()
	if err != nil {
		live.Unlock()
		return nil, err
	}
	now := time.Now().UnixNano()
	reset := &journal.Record{Op: journal.OpReset, Time: now, ResetTo: target, Supersedes: path.Latest(), Comm: "reynfs"}
	j.Enqueue(reset, oldBlobs) // the abandoned state's objects stay reachable
	if err := j.Sync(); err != nil {
		live.Unlock()
		return nil, fmt.Errorf("rewind: reset record: %w", err)
	}
	res.Reset = reset.Seq
	lap("reset")
	fault("after-reset")
	g := &journal.Record{Op: journal.OpGeneration, Time: now, GenKind: KindRewind,
		Label: fmt.Sprintf("rewind to %d", target), Root: newRoot, NextIno: live.NextInoLocked(),
		Agents: agents.Refs(states)}
	j.Enqueue(g, newBlobs)
	fault("mid-swap")
	live.Swap(nt)
	rw.agents().Reset(states)
	err = j.Sync()
	live.Unlock()
	if err != nil {
		return nil, fmt.Errorf("rewind: %w", err)
	}
	lap("swap")
	fault("after-swap")
	if err := indexGeneration(j, g.Seq); err != nil {
		return nil, err
	}
	lap("index")
	rw.invalidate(changes)
	lap("invalidate")
	res.Took = time.Since(start)
	return res, nil
}

func (rw *Rewinder) invalidate(cs []Change) {
	if rw.Inv == nil {
		return
	}
	for _, c := range cs {
		if c.entry {
			rw.Inv.InvalidateEntry(c.par, c.name)
		}
		rw.Inv.InvalidateInode(c.Ino)
	}
	rw.Inv.InvalidateInode(tree.RootIno)
}

func putBlobs(s cas.Store, blobs []cas.Blob) error {
	for _, b := range blobs {
		if _, err := s.Put(b.Data); err != nil {
			return fmt.Errorf("store objects: %w", err)
		}
	}
	return nil
}
