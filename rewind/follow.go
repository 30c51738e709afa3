package rewind

import (
	"fmt"
	"time"

	"github.com/reynfs/reynfs/fs/tree"
)

// Advance moves the live tree of a follower mount (rewind/replica
// follow.go) to the state at seq head, whose records another process
// (a fetch) has just appended under their own seqs. Unlike a rewind it
// appends nothing: no reset record, no generation. The state at head is
// already what the journal says it is (the records are the remote's,
// byte for byte), so Advance does what opening the store would do,
// reconstruct(head) (the generation head replays from, then the records
// after it on head's path, the writer's own resets included), reusing
// the live tree's unchanged nodes, and swaps it in. Both happen under
// the live lock, so a reader sees the tree before or after, never a
// mix, and a failure leaves the served tree as it was. The kernel's
// caches of what changed are invalidated after the lock is released
// (invariant 12), as a rewind's are. Objects the move computes (inode objects of replayed
// directories) are stored, as a dry rewind stores them: a later root of
// the live tree (the write-back at unmount) names them. Open handles
// become stale for writes only; a follower takes none.
func (rw *Rewinder) Advance(head uint64) (*Result, error) {
	rw.mu.Lock() // a rewind would not be refused on a follower: wait for it
	defer rw.mu.Unlock()
	start := time.Now()
	res := &Result{Target: head}
	err := rw.exclusive(func(x locked) (Invalidations, error) { return x.advance(res, head) })
	if err != nil {
		return nil, err
	}
	res.Took = time.Since(start)
	return res, nil
}

func (x locked) advance(res *Result, head uint64) (Invalidations, error) {
	j, live := x.j, x.live
	var none Invalidations
	if err := live.FlushAllLocked(tree.Caller{Comm: "reynfs-follow"}); err != nil {
		return none, err
	}
	states, err := AgentStates(j, head)
	if err != nil {
		return none, err
	}
	t := live.Tree()
	oldRoot, oldBlobs, err := t.Root()
	if err != nil {
		return none, err
	}
	if err := StoreBlobs(j.Objects(), oldBlobs); err != nil {
		return none, err
	}
	// The new state is built beside the served tree (LoadFrom copies
	// the unchanged nodes), not by grafting the served tree in place:
	// a replay may need a chunk (a truncate inside one), and a lazy
	// store fetches it from the remote, which may fail midway; the
	// served tree must then stay as it was (the follower retries).
	nt, err := ReconstructFrom(j, head, t)
	if err != nil {
		return none, fmt.Errorf("follow to seq %d: %w", head, err)
	}
	newRoot, newBlobs, err := nt.Root()
	if err != nil {
		return none, err
	}
	if err := StoreBlobs(j.Objects(), newBlobs); err != nil {
		return none, err
	}
	changes, err := DiffRoots(j.Objects(), oldRoot, newRoot)
	if err != nil {
		return none, err
	}
	res.setChanges(changes, newRoot)
	live.Swap(nt)
	x.agents.Reset(states)
	return invalidations(changes), nil
}
