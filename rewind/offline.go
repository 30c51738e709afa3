package rewind

import (
	"fmt"
	"time"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/journal"
)

// RewindStore rewinds an unmounted store: it appends and syncs the reset
// record, and the next mount serves the target state (recovery follows the
// active path). The result lists what changes against head.
func RewindStore(j *journal.Journal, target uint64, dry bool) (*Result, error) {
	return RewindStoreAs(j, target, dry, "")
}

// RewindStoreAs is RewindStore with the label of the reset record (see
// Rewinder.RewindAs).
func RewindStoreAs(j *journal.Journal, target uint64, dry bool, label string) (*Result, error) {
	start := time.Now()
	head := j.Head()
	cur, err := Reconstruct(j, head)
	if err != nil {
		return nil, err
	}
	nt, err := Reconstruct(j, target)
	if err != nil {
		return nil, err
	}
	oldRoot, oldBlobs, err := cur.Root()
	if err != nil {
		return nil, err
	}
	newRoot, newBlobs, err := nt.Root()
	if err != nil {
		return nil, err
	}
	res := &Result{Target: target, Root: newRoot}
	if res.Changes, err = DiffRoots(NewOverlay(j.Objects(), oldBlobs, newBlobs), oldRoot, newRoot); err != nil {
		return nil, err
	}
	res.Summary = Summarize(res.Changes)
	if dry {
		res.Took = time.Since(start)
		return res, nil
	}
	path, err := j.Path()
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	reset := &journal.Record{Op: journal.OpReset, Time: now, ResetTo: target, Supersedes: path.Latest(), Comm: "reynfs", Label: label}
	states, err := AgentStates(j, target)
	if err != nil {
		return nil, err
	}
	if err := enqueue(j, reset, oldBlobs); err != nil {
		return nil, fmt.Errorf("rewind: %w", err)
	}
	g := &journal.Record{Op: journal.OpGeneration, Time: now, GenKind: KindRewind,
		Label: fmt.Sprintf("rewind to %d", target), Root: newRoot, NextIno: nt.MaxIno() + 1,
		Agents: agents.Refs(states)}
	if gerr := enqueue(j, g, newBlobs); gerr != nil {
		// The reset is queued: once stored, the store serves the target.
		if err := j.Sync(); err != nil {
			return nil, fmt.Errorf("rewind: %w", err)
		}
		return nil, fmt.Errorf("rewind: the reset record (seq %d) is stored, its generation is not: %w", reset.Seq, gerr)
	}
	if err := j.Sync(); err != nil {
		return nil, fmt.Errorf("rewind: %w", err)
	}
	res.Reset = reset.Seq
	res.Took = time.Since(start)
	return res, indexGeneration(j, g.Seq)
}
