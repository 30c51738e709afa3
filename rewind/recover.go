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
	p, release, err := holdPlan(j, x, 0) // the collector keeps what this reads
	if err != nil {
		return nil, err
	}
	defer release()
	t, err := tree.LoadFrom(j.Objects(), p.root, base)
	if err != nil {
		return nil, fmt.Errorf("reconstruct %d: generation %d: %w", x, p.gen, err)
	}
	if _, err := p.replay(j, t); err != nil {
		return nil, err
	}
	return t, nil
}

// replayPlan says how to reach the state at x: the tree of generation gen
// (root), then the records after it on x's path up to x. Before the first
// generation, gen is the import record the store starts with: an import
// replaces the whole tree, so its root is the state at its seq just as a
// generation's is (the first generation is cut one record after it).
type replayPlan struct {
	x, gen uint64
	root   cas.Hash
	path   *journal.Path
}

// planReplay finds the nearest generation at or before x on x's path and
// checks that the state is retained; it reads no tree.
func planReplay(j *journal.Journal, x uint64) (*replayPlan, error) {
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
	p := &replayPlan{x: x, path: path}
	for i := len(gens) - 1; i >= 0; i-- {
		g := gens[i]
		if g > x || !path.OnPath(g, x) {
			continue
		}
		r, err := j.Get(g)
		if err != nil {
			return nil, fmt.Errorf("reconstruct %d: generation %d: %w", x, g, err)
		}
		p.gen, p.root = g, r.Root
		break
	}
	if p.gen == 0 {
		if p.gen, p.root, err = importBefore(j, path, x); err != nil {
			return nil, fmt.Errorf("reconstruct %d: %w", x, err)
		}
	}
	if err := checkRetained(j, x, p.gen); err != nil {
		return nil, err
	}
	if p.gen == 0 {
		return nil, fmt.Errorf("reconstruct %d: %w", x, ErrNoState)
	}
	return p, nil
}

// importBefore finds the newest import record at or before x on x's path
// (0: none). Only the records before the first generation are read, so the
// scan is short: a store's first records are its import and the import
// generation that follows it.
func importBefore(j *journal.Journal, path *journal.Path, x uint64) (uint64, cas.Hash, error) {
	var seq uint64
	var root cas.Hash
	err := j.Iter(1, func(r *journal.Record) error {
		if r.Seq > x {
			return errStop
		}
		if r.Op == journal.OpImport && path.OnPath(r.Seq, x) {
			seq, root = r.Seq, r.Root
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, cas.Hash{}, err
	}
	return seq, root, nil
}

// replay applies the records after the plan's generation on x's path, up
// to x, to t (the generation's tree), and returns how many it applied. An
// import replaces the whole tree (grafted in place).
func (p *replayPlan) replay(j *journal.Journal, t *tree.Tree) (int, error) {
	applied := 0
	err := j.Iter(p.gen+1, func(r *journal.Record) error {
		if r.Seq > p.x {
			return errStop
		}
		if !p.path.OnPath(r.Seq, p.x) {
			return nil
		}
		applied++
		if r.Op == journal.OpImport {
			// Graft starts from a clean tree; the objects Root makes are
			// stored, as every object a clean node names must be.
			_, blobs, err := t.Root()
			if err == nil {
				err = StoreBlobs(j.Objects(), blobs)
			}
			if err != nil {
				return fmt.Errorf("seq %d: %w", r.Seq, err)
			}
			if err := t.Graft(r.Root); err != nil {
				return fmt.Errorf("seq %d: %w", r.Seq, err)
			}
			return nil
		}
		if err := t.Apply(r); err != nil {
			return fmt.Errorf("replay seq %d (%v): %w", r.Seq, r.Op, err)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return applied, fmt.Errorf("reconstruct %d: %w", p.x, err)
	}
	return applied, nil
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
