package rewind

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/journal"
)

// Branches.
//
// Every record has one parent state: the record before it, or for a reset
// record its target (the state at y is y's record plus its parent's
// state; journal.Path). So the records form a tree, and the state at head
// is one leaf of it. Every other leaf is the tip of an abandoned branch:
// a seq T whose next record T+1 is a reset (it left T behind) and that no
// later reset targets (that would have continued it). A branch's fork
// point is where its path meets the current one: the newest seq on both
// (the lowest common ancestor of T and head).
//
// A branch's automatic name is b-T, from its tip seq: a seq is never
// reissued and a tip never changes, so the name is stable for as long as
// the branch is a branch (a later reset to T continues it, and b-T is gone
// with it). A branch whose tip's tree is its fork point's is not listed:
// an undo leaves one (the rewound state, a state on the current path
// already), and so does a remount after a rewind (its generation).
// Branches whose own records are only resets and generations are skipped
// without reconstructing them.
//
// A given name (reynfs branch NAME [TARGET]) marks one seq, as a tag does:
// checkout NAME rewinds to exactly that state. Names live in the store
// under the 'n' prefix (name -> seq, time), written once and never
// changed, and share one namespace with labels (CheckName).

// BranchPrefix starts every automatic branch name.
const BranchPrefix = "b-"

// namePrefix keys the given names: 'n' + name, value seq (8 B BE) + time
// (8 B BE, Unix ns).
const namePrefix = 'n'

// Name is a name given to a seq.
type Name struct {
	Name string    `json:"name"`
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
}

// Names lists the given names in name order.
func Names(j *journal.Journal) ([]Name, error) {
	var out []Name
	err := j.DB().View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{namePrefix}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if len(v) != 16 {
				return fmt.Errorf("%w: name %q has a %d-byte value", journal.ErrCorrupt, it.Item().Key()[1:], len(v))
			}
			out = append(out, Name{Name: string(it.Item().Key()[1:]), Seq: binary.BigEndian.Uint64(v),
				Time: time.Unix(0, int64(binary.BigEndian.Uint64(v[8:])))})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("names: %w", err)
	}
	return out, nil
}

// SetName gives name to seq: checked by CheckName against the names in
// use, written once and synced. The caller serializes (Serialize).
func SetName(j *journal.Journal, name string, seq uint64) error {
	taken, err := TakenNames(j)
	if err != nil {
		return err
	}
	if err := CheckName(name, taken); err != nil {
		return err
	}
	v := binary.BigEndian.AppendUint64(nil, seq)
	v = binary.BigEndian.AppendUint64(v, uint64(time.Now().UnixNano()))
	key := append([]byte{namePrefix}, name...)
	err = j.DB().Update(func(txn *badger.Txn) error {
		if _, err := txn.Get(key); err == nil {
			return fmt.Errorf("%w: %q is already a branch name", ErrName, name)
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		return txn.Set(key, v)
	})
	if err != nil {
		return fmt.Errorf("name %s: %w", name, err)
	}
	if err := j.DB().Sync(); err != nil {
		return fmt.Errorf("name %s: %w", name, err)
	}
	return nil
}

// PutName records a name another store gave (a clone's, from its
// remote): name's form is checked, not whether it is taken on the
// current path, since the name was given where that held. Writing the
// same name and seq again is no change; the name at another seq is
// refused. Synced.
func PutName(j *journal.Journal, n Name) error {
	if err := checkForm(n.Name); err != nil {
		return err
	}
	v := binary.BigEndian.AppendUint64(nil, n.Seq)
	v = binary.BigEndian.AppendUint64(v, uint64(n.Time.UnixNano()))
	key := append([]byte{namePrefix}, n.Name...)
	err := j.DB().Update(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return txn.Set(key, v)
		} else if err != nil {
			return err
		}
		old, err := it.ValueCopy(nil)
		if err != nil {
			return err
		}
		if len(old) == 16 && binary.BigEndian.Uint64(old) == n.Seq {
			return nil
		}
		return fmt.Errorf("%w: %q names another seq here", ErrName, n.Name)
	})
	if err == nil {
		err = j.DB().Sync()
	}
	if err != nil {
		return fmt.Errorf("name %s: %w", n.Name, err)
	}
	return nil
}

// Branch is an abandoned branch, or a seq with a given name.
type Branch struct {
	Name  string    `json:"name"`            // b-TIP, or the given name
	Names []string  `json:"names,omitempty"` // names given to its tip
	Tip   uint64    `json:"tip_seq"`
	Gen   int       `json:"tip_gen,omitempty"` // the newest generation on the tip's path
	Label string    `json:"tip_label,omitempty"`
	Fork  uint64    `json:"fork_seq"`  // newest seq on its path and the current one
	Reset uint64    `json:"reset_seq"` // the reset that left it (0: a name on no abandoned tip)
	Time  time.Time `json:"time"`      // of the tip record
	// Current: the tip is on the current path (only a given name can be).
	Current bool `json:"current,omitempty"`
	// Changed counts what the tip changes against the fork point.
	Changed Summary `json:"changed"`
}

// Branches lists the abandoned branches, newest tip first, then the given
// names that are on no abandoned tip.
func Branches(j *journal.Journal) ([]Branch, error) {
	path, err := j.Path()
	if err != nil {
		return nil, err
	}
	resets, err := j.Resets()
	if err != nil {
		return nil, err
	}
	floor, err := j.Floor()
	if err != nil {
		return nil, err
	}
	names, err := Names(j)
	if err != nil {
		return nil, err
	}
	gens, err := Timeline(j)
	if err != nil {
		return nil, err
	}
	head := j.Head()
	targeted := map[uint64]bool{}
	for _, r := range resets {
		targeted[r.ResetTo] = true
	}
	byTip := map[uint64][]string{}
	for _, n := range names {
		byTip[n.Seq] = append(byTip[n.Seq], n.Name)
	}
	var out []Branch
	seen := map[uint64]bool{}
	for i := len(resets) - 1; i >= 0; i-- {
		tip := resets[i].Seq - 1
		if tip == 0 || tip < floor || targeted[tip] || tip == head {
			continue
		}
		fork := forkPoint(path, tip, head)
		empty, err := onlyControl(j, path, fork, tip)
		if err != nil {
			return nil, err
		}
		if empty {
			continue
		}
		b := Branch{Name: BranchPrefix + strconv.FormatUint(tip, 10), Names: byTip[tip], Tip: tip, Fork: fork, Reset: resets[i].Seq}
		if err := fill(j, path, gens, &b); err != nil {
			return nil, err
		}
		if b.Changed == (Summary{}) {
			continue
		}
		seen[tip] = true
		out = append(out, b)
	}
	for _, n := range names {
		if seen[n.Seq] || n.Seq < floor || n.Seq > head {
			continue
		}
		b := Branch{Name: n.Name, Tip: n.Seq, Fork: forkPoint(path, n.Seq, head), Current: path.OnPath(n.Seq, head)}
		if err := fill(j, path, gens, &b); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// fill sets a branch's time, tip generation and counts.
func fill(j *journal.Journal, path *journal.Path, gens []Gen, b *Branch) error {
	r, err := j.Get(b.Tip)
	if err != nil {
		return fmt.Errorf("branch %s: %w", b.Name, err)
	}
	b.Time = time.Unix(0, r.Time)
	for i := len(gens) - 1; i >= 0; i-- {
		if path.OnPath(gens[i].Rec.Seq, b.Tip) {
			b.Gen, b.Label = gens[i].ID, gens[i].Rec.Label
			break
		}
	}
	if b.Fork == b.Tip {
		return nil
	}
	a, err := Reconstruct(j, b.Fork)
	if err != nil {
		return err
	}
	t, err := Reconstruct(j, b.Tip)
	if err != nil {
		return err
	}
	ra, ba, err := a.Root()
	if err != nil {
		return err
	}
	rt, bt, err := t.Root()
	if err != nil {
		return err
	}
	cs, err := DiffRoots(NewOverlay(j.Objects(), ba, bt), ra, rt)
	if err != nil {
		return fmt.Errorf("branch %s: %w", b.Name, err)
	}
	b.Changed = Summarize(Coalesce(cs))
	return nil
}

// forkPoint is the newest seq on both x's path and y's: the paths are
// chains of ancestors, so their common part is the chain of the lowest
// common ancestor, and that is its newest seq.
func forkPoint(p *journal.Path, x, y uint64) uint64 {
	a, b := p.Segments(x), p.Segments(y)
	var best uint64
	for _, s := range a {
		for _, t := range b {
			lo, hi := max(s.From, t.From), min(s.To, t.To)
			if lo <= hi && hi > best {
				best = hi
			}
		}
	}
	return best
}

// onlyControl reports whether the records on tip's path after fork are
// all resets and generations (none changes the tree).
func onlyControl(j *journal.Journal, p *journal.Path, fork, tip uint64) (bool, error) {
	only := true
	for _, s := range p.Segments(tip) {
		if s.To <= fork {
			continue
		}
		err := j.Iter(max(s.From, fork+1), func(r *journal.Record) error {
			if r.Seq > s.To {
				return errStop
			}
			if r.Op == journal.OpReset || r.Op == journal.OpGeneration {
				return nil
			}
			only = false
			return errStop
		})
		if err != nil && !errors.Is(err, errStop) {
			return false, err
		}
		if !only {
			break
		}
	}
	return only, nil
}

// ResolveBranch turns a branch name (b-TIP or a given name) into its tip
// seq; ok is false when name is neither.
func ResolveBranch(j *journal.Journal, name string) (seq uint64, ok bool, err error) {
	if rest, found := strings.CutPrefix(name, BranchPrefix); found && allDigits(rest) {
		n, err := strconv.ParseUint(rest, 10, 64)
		if err != nil {
			return 0, true, fmt.Errorf("%w: %s: %v", ErrTarget, name, err)
		}
		return n, true, nil
	}
	names, err := Names(j)
	if err != nil {
		return 0, false, err
	}
	for _, n := range names {
		if n.Name == name {
			return n.Seq, true, nil
		}
	}
	return 0, false, nil
}
