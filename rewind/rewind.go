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
	// WriteBack has the kernel hand over dirty pages of shared writable
	// mappings, so that a cut or a rewind includes them.
	WriteBack() error
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
// before anything else changes, moves the live tree to the target in place
// (Graft: only what differs is touched), cuts a generation of kind rewind,
// and then invalidates the kernel's caches of what changed. Open handles
// from before become stale. A dry run computes the same on a copy.
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

	if err := rw.writeBack(); err != nil {
		return nil, err
	}
	live.Lock()
	defer live.Unlock()
	if err := live.FlushAllLocked(tree.Caller{Comm: "reynfs-rewind"}); err != nil {
		return nil, err
	}
	if err := j.Sync(); err != nil { // replay reads committed records only
		return nil, err
	}
	lap("flush")
	t := live.Tree()
	oldRoot, oldBlobs, err := t.Root()
	if err != nil {
		return nil, err
	}
	lap("root")
	if dry {
		// Root hands out the live tree's new objects once: keep them, or
		// the next generation would name objects nobody stored.
		if err := StoreBlobs(j.Objects(), oldBlobs); err != nil {
			return nil, err
		}
		nt, err := ReconstructFrom(j, target, t)
		if err != nil {
			return nil, err
		}
		newRoot, newBlobs, err := nt.Root()
		if err != nil {
			return nil, err
		}
		lap("reconstruct")
		changes, err := DiffRoots(NewOverlay(j.Objects(), newBlobs), oldRoot, newRoot)
		if err != nil {
			return nil, err
		}
		res.setChanges(changes, newRoot)
		lap("diff")
		res.Took = time.Since(start)
		return res, nil
	}

	// Everything that can refuse the target, before the reset record.
	plan, err := planReplay(j, target)
	if err != nil {
		return nil, err
	}
	states, err := AgentStates(j, target)
	if err != nil {
		return nil, err
	}
	path, err := j.Path()
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	reset := &journal.Record{Op: journal.OpReset, Time: now, ResetTo: target, Supersedes: path.Latest(), Comm: "reynfs"}
	j.Enqueue(reset, oldBlobs) // the abandoned state's objects stay reachable
	if err := j.Sync(); err != nil {
		return nil, fmt.Errorf("rewind: reset record: %w", err)
	}
	res.Reset = reset.Seq
	lap("reset")
	fault("after-reset")

	// The reset is durable: from here the workspace is the target state,
	// whatever happens to this process.
	if t, err = rw.moveTo(t, plan); err != nil {
		live.FailLocked(err)
		return nil, fmt.Errorf("rewind: %w (the reset record is durable: remount to serve the target)", err)
	}
	newRoot, newBlobs, err := t.Root()
	if err != nil {
		live.FailLocked(err)
		return nil, err
	}
	lap("reconstruct")
	changes, err := DiffRoots(NewOverlay(j.Objects(), newBlobs), oldRoot, newRoot)
	if err != nil {
		live.FailLocked(err)
		return nil, err
	}
	res.setChanges(changes, newRoot)
	lap("diff")
	g := &journal.Record{Op: journal.OpGeneration, Time: now, GenKind: KindRewind,
		Label: fmt.Sprintf("rewind to %d", target), Root: newRoot, NextIno: live.NextInoLocked(),
		Agents: agents.Refs(states)}
	j.Enqueue(g, newBlobs)
	fault("mid-swap")
	live.Swap(t)
	rw.agents().Reset(states)
	if err := j.Sync(); err != nil {
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

// moveTo turns the live tree t into the planned state in place: a graft
// to the plan's generation, then the replay. If that fails midway, the
// tree is rebuilt from the store instead.
func (rw *Rewinder) moveTo(t *tree.Tree, plan *replayPlan) (*tree.Tree, error) {
	t.OnDrop = nil // nodes the move drops are not unlinked files; Swap sets it again
	err := t.Graft(plan.root)
	if err == nil {
		err = plan.replay(rw.J, t)
	}
	if err == nil {
		return t, nil
	}
	nt, rerr := Reconstruct(rw.J, plan.x)
	if rerr != nil {
		return nil, fmt.Errorf("%v; rebuilding it: %w", err, rerr)
	}
	return nt, nil
}

func (res *Result) setChanges(changes []Change, root cas.Hash) {
	res.Changes = Coalesce(changes)
	if res.Changes == nil {
		res.Changes = []Change{}
	}
	res.Summary, res.Root = Summarize(res.Changes), root
}

// writeBack brings the kernel's dirty mapped pages in (before any lock).
func (rw *Rewinder) writeBack() error {
	if rw.Inv == nil {
		return nil
	}
	return rw.Inv.WriteBack()
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

// StoreBlobs puts blobs into s. Tree.Root hands out each new object once:
// a caller that does not journal them must store them, or a later root
// would name objects nobody kept.
func StoreBlobs(s cas.Store, blobs []cas.Blob) error {
	for _, b := range blobs {
		if _, err := s.Put(b.Data); err != nil {
			return fmt.Errorf("store objects: %w", err)
		}
	}
	return nil
}
