package rewind

import (
	"errors"
	"fmt"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// ErrNoState: the store holds no generation on the wanted path (a store
// whose first import never finished).
var ErrNoState = errors.New("store holds no generation to start from")

// Reconstruct returns the tree as it was the moment seq x was appended:
// the nearest generation at or before x on x's own path, plus replay of
// that path's records up to x. Crash recovery is Reconstruct(head).
func Reconstruct(j *journal.Journal, x uint64) (*tree.Tree, error) {
	return ReconstructFrom(j, x, nil)
}

// ReconstructFrom is Reconstruct that copies from base (a clean tree, such
// as the live one) every subtree the state at x shares with it, instead of
// reading it from the store.
func ReconstructFrom(j *journal.Journal, x uint64, base *tree.Tree) (*tree.Tree, error) {
	if x > j.Durable() {
		// Replay reads committed records: wait for those up to x.
		if err := j.Sync(); err != nil {
			return nil, fmt.Errorf("reconstruct %d: %w", x, err)
		}
	}
	resets, err := j.Resets()
	if err != nil {
		return nil, fmt.Errorf("reconstruct %d: %w", x, err)
	}
	path, err := journal.NewPath(resets)
	if err != nil {
		return nil, fmt.Errorf("reconstruct %d: %w", x, err)
	}
	gens, err := Generations(j)
	if err != nil {
		return nil, fmt.Errorf("reconstruct %d: %w", x, err)
	}
	var start uint64 // replay from here (exclusive)
	var t *tree.Tree
	for i := len(gens) - 1; i >= 0; i-- {
		g := gens[i]
		if g > x || !path.OnPath(g, x) {
			continue
		}
		r, err := j.Get(g)
		if err != nil {
			return nil, fmt.Errorf("reconstruct %d: generation %d: %w", x, g, err)
		}
		if t, err = tree.LoadFrom(j.Objects(), r.Root, base); err != nil {
			return nil, fmt.Errorf("reconstruct %d: generation %d: %w", x, g, err)
		}
		start = g
		break
	}
	if err := checkRetained(j, x, start); err != nil {
		return nil, err
	}
	err = j.Iter(start+1, func(r *journal.Record) error {
		if r.Seq > x {
			return errStop
		}
		if !path.OnPath(r.Seq, x) {
			return nil
		}
		if r.Op == journal.OpImport {
			nt, err := tree.Load(j.Objects(), r.Root)
			if err != nil {
				return fmt.Errorf("seq %d: %w", r.Seq, err)
			}
			t = nt
			return nil
		}
		if t == nil {
			return fmt.Errorf("seq %d before any generation: %w", r.Seq, ErrNoState)
		}
		if err := t.Apply(r); err != nil {
			return fmt.Errorf("replay seq %d (%v): %w", r.Seq, r.Op, err)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, fmt.Errorf("reconstruct %d: %w", x, err)
	}
	if t == nil {
		return nil, ErrNoState
	}
	return t, nil
}

var errStop = errors.New("stop")

// Verify re-hashes every object reachable from the indexed generations.
func Verify(j *journal.Journal) (objects int, err error) {
	gens, err := Generations(j)
	if err != nil {
		return 0, err
	}
	var roots []cas.Hash
	for _, g := range gens {
		r, err := j.Get(g)
		if err != nil {
			return 0, err
		}
		roots = append(roots, r.Root)
	}
	return cas.Verify(j.Objects(), roots)
}
