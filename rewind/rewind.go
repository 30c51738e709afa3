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
// called after the swap, outside every lock and every FUSE handler: the
// code that runs under the live lock (type locked) has no Invalidator.
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
	// Phases says where the time went (writeback, flush, root,
	// reconstruct, diff, reset: the sync of the reset record and the
	// generation, swap, index, invalidate), for people tuning it.
	Phases []Phase `json:"phases,omitempty"`
}

// Phase is one timed step of a rewind.
type Phase struct {
	Name string        `json:"name"`
	Took time.Duration `json:"took_ns"`
}

// FaultEnv names the environment variable that makes the daemon die at a
// chosen point of a rewind (tests use it): after-reset, mid-swap,
// after-swap; or, set to import-stall, holds a cancellable import at its
// first entry until it is cancelled.
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
	ops    sync.Mutex // Serialize: undo, redo, checkout and naming
	J      *journal.Journal
	Live   *tree.Live
	Inv    Invalidator      // nil when nothing is mounted
	Agents *agents.Registry // the agents' current states; nil: none saved yet
}

// Serialize holds off other undos, redos, checkouts and namings until
// the returned function is called: each reads the op log or the names in
// use and then writes, and two at once would act on the same entry.
func (rw *Rewinder) Serialize() (unlock func()) {
	rw.ops.Lock()
	return rw.ops.Unlock
}

func (rw *Rewinder) agents() *agents.Registry {
	if rw.Agents == nil {
		rw.Agents = agents.NewRegistry(nil)
	}
	return rw.Agents
}

// Rewind moves the live workspace to the state at seq target: it journals
// buffered writes, appends the reset record {target, supersedes} before
// anything else changes, moves the live tree to the target in place
// (Graft: only what differs is touched), appends a generation of kind
// rewind, syncs both at once before anyone can see the move (the live
// lock is held throughout), and then, with the lock released, invalidates
// the kernel's caches of what changed. Open handles from before become
// stale. A dry run computes the same on a copy.
func (rw *Rewinder) Rewind(target uint64, dry bool) (*Result, error) {
	return rw.RewindAs(target, dry, "")
}

// RewindAs is Rewind with the label of its reset record, which says what
// operation the rewind is (see ops.go: "" a rewind, "checkout NAME",
// "undo ID", "redo ID").
func (rw *Rewinder) RewindAs(target uint64, dry bool, label string) (*Result, error) {
	if !rw.mu.TryLock() {
		return nil, fmt.Errorf("%w: another rewind is running", ErrTarget)
	}
	defer rw.mu.Unlock()
	start := time.Now()
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
	lap("writeback")
	err := rw.exclusive(func(x locked) (Invalidations, error) { return x.rewind(res, target, dry, label, lap) })
	if err != nil {
		return nil, err
	}
	if !dry {
		lap("invalidate")
	}
	res.Took = time.Since(start)
	return res, nil
}

// locked is the part of the Rewinder that runs under the live tree's
// lock: the journal, the live tree and the agents' states, and no
// Invalidator. A kernel notification sent under that lock can wait for a
// FUSE handler that waits for the lock (invalidating a page of a shared
// writable mapping makes the kernel write it back first, and the WRITE
// needs the live tree), and the mount hangs (invariant 12). So code here
// cannot send one: it returns the Invalidations, and exclusive sends them
// once the lock is released.
type locked struct {
	j      *journal.Journal
	live   *tree.Live
	agents *agents.Registry
}

// exclusive runs fn with the live tree locked, then unlocks and sends the
// invalidations fn returned, also those of a rewind that failed after its
// swap.
func (rw *Rewinder) exclusive(fn func(x locked) (Invalidations, error)) error {
	x := locked{j: rw.J, live: rw.Live, agents: rw.agents()}
	inv, err := func() (Invalidations, error) {
		x.live.Lock()
		defer x.live.Unlock()
		return fn(x)
	}()
	rw.send(inv)
	return err
}

// rewind is Rewind's exclusive section; see Rewind.
func (x locked) rewind(res *Result, target uint64, dry bool, label string, lap func(string)) (Invalidations, error) {
	j, live := x.j, x.live
	var none Invalidations
	// No sync here: replay and the agents' states read committed records
	// only, and planReplay and StatesAt wait for those up to the target
	// when the target is that new; the reset's sync covers the rest.
	if err := live.FlushAllLocked(tree.Caller{Comm: "reynfs-rewind"}); err != nil {
		return none, err
	}
	lap("flush")
	t := live.Tree()
	oldRoot, oldBlobs, err := t.Root()
	if err != nil {
		return none, err
	}
	lap("root")
	if dry {
		// Root hands out the live tree's new objects once: keep them, or
		// the next generation would name objects nobody stored.
		if err := StoreBlobs(j.Objects(), oldBlobs); err != nil {
			return none, err
		}
		nt, err := ReconstructFrom(j, target, t)
		if err != nil {
			return none, err
		}
		newRoot, newBlobs, err := nt.Root()
		if err != nil {
			return none, err
		}
		lap("reconstruct")
		changes, err := DiffRoots(NewOverlay(j.Objects(), newBlobs), oldRoot, newRoot)
		if err != nil {
			return none, err
		}
		res.setChanges(changes, newRoot)
		lap("diff")
		return none, nil
	}

	// Everything that can refuse the target, before the reset record.
	plan, err := planReplay(j, target)
	if err != nil {
		return none, err
	}
	states, err := AgentStates(j, target)
	if err != nil {
		return none, err
	}
	now := time.Now().UnixNano()
	reset := &journal.Record{Op: journal.OpReset, Time: now, ResetTo: target, Supersedes: plan.path.Latest(), Comm: "reynfs", Label: label}
	// The abandoned state's objects stay reachable. A refused reset
	// changes nothing: no move, no generation.
	if err := enqueue(j, reset, oldBlobs); err != nil {
		return none, fmt.Errorf("rewind: %w", err)
	}
	res.Reset = reset.Seq

	// The reset is queued: from here the workspace is the target state.
	// The tree moves before the reset is durable, so that one sync stores
	// the reset and the generation after it together (one device flush,
	// not two); no one sees the moved tree before that sync (the lock),
	// and a crash before it leaves the store at the old state.
	t, changes, err := x.moveTo(t, plan)
	if err != nil {
		live.FailLocked(err)
		if serr := j.Sync(); serr != nil {
			return none, fmt.Errorf("rewind: %w; reset record: %w", err, serr)
		}
		return none, fmt.Errorf("rewind: %w (the reset record is durable: remount to serve the target)", err)
	}
	newRoot, newBlobs, err := t.Root()
	if err != nil {
		live.FailLocked(err)
		return none, err
	}
	lap("reconstruct")
	if changes == nil {
		// The move replayed records after the graft: diff the roots (the
		// old root's new objects are queued with the reset, maybe not
		// stored yet).
		if changes, err = DiffRoots(NewOverlay(j.Objects(), oldBlobs, newBlobs), oldRoot, newRoot); err != nil {
			live.FailLocked(err)
			return none, err
		}
	}
	res.setChanges(changes, newRoot)
	lap("diff")
	g := &journal.Record{Op: journal.OpGeneration, Time: now, GenKind: KindRewind,
		Label: fmt.Sprintf("rewind to %d", target), Root: newRoot, NextIno: live.NextInoLocked(),
		Agents: agents.Refs(states)}
	gerr := enqueue(j, g, newBlobs)
	serr := j.Sync()
	lap("reset")
	if serr == nil {
		fault("after-reset")
		fault("mid-swap")
	}
	// The tree has moved in place: swap it in (new epoch: handles from
	// before are stale) even when the sync failed, as the reset may be
	// stored; the failed journal then keeps the mount from taking writes.
	live.Swap(t)
	x.agents.Reset(states)
	inv := invalidations(changes) // from here the kernel's caches are wrong
	if serr != nil {
		live.FailLocked(serr)
		return inv, fmt.Errorf("rewind: reset record: %w (remount: the store holds the old state or the target)", serr)
	}
	if gerr != nil {
		return inv, fmt.Errorf("rewind: the workspace is at seq %d (reset record %d), but its generation was not stored: %w", target, reset.Seq, gerr)
	}
	lap("swap")
	fault("after-swap")
	if err := indexGeneration(j, g.Seq); err != nil {
		return inv, err
	}
	lap("index")
	return inv, nil
}

// moveTo turns the live tree t into the planned state in place: a graft
// to the plan's generation, then the replay. If that fails midway, the
// tree is rebuilt from the store instead. When the graft alone reached the
// state (no record to replay, as for a rewind to a generation), it also
// returns the changes the graft found (an empty list for none); nil means
// the caller must diff the roots.
func (x locked) moveTo(t *tree.Tree, plan *replayPlan) (*tree.Tree, []Change, error) {
	t.OnDrop = nil // nodes the move drops are not unlinked files; Swap sets it again
	tcs, err := t.GraftDiff(plan.root)
	replayed := 0
	if err == nil {
		replayed, err = plan.replay(x.j, t)
	}
	if err == nil {
		if replayed > 0 {
			return t, nil, nil
		}
		return t, fromTree(tcs), nil
	}
	nt, rerr := Reconstruct(x.j, plan.x)
	if rerr != nil {
		return nil, nil, fmt.Errorf("%v; rebuilding it: %w", err, rerr)
	}
	return nt, nil, nil
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

// Invalidations are the kernel caches a swap made wrong: directory
// entries (parent, name) and inodes. Only exclusive's caller side sends
// them, after the live lock is released; see locked.
type Invalidations struct {
	entries []entryRef
	inodes  []uint64
}

type entryRef struct {
	parent uint64
	name   string
}

// invalidations lists what the changes of a swap leave stale in the
// kernel: each changed entry and inode, and the root's attributes.
func invalidations(cs []Change) Invalidations {
	var inv Invalidations
	for _, c := range cs {
		if c.entry {
			inv.entries = append(inv.entries, entryRef{c.par, c.name})
		}
		inv.inodes = append(inv.inodes, c.Ino)
	}
	inv.inodes = append(inv.inodes, tree.RootIno)
	return inv
}

// send hands inv to the kernel. It must run with no lock a FUSE handler
// needs held, which is why only exclusive calls it, after unlocking.
func (rw *Rewinder) send(inv Invalidations) {
	if rw.Inv == nil {
		return
	}
	for _, e := range inv.entries {
		rw.Inv.InvalidateEntry(e.parent, e.name)
	}
	for _, ino := range inv.inodes {
		rw.Inv.InvalidateInode(ino)
	}
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
