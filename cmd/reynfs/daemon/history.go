package daemon

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/rewind"
)

// history serves the read-only history views (.reynfs/ unless the mount
// names them otherwise) from the store.
type history struct{ s *Service }

func (h history) Generations() ([]string, []uint64, error) {
	gens, err := rewind.Timeline(h.s.J)
	if err != nil {
		return nil, nil, err
	}
	names, seqs := make([]string, len(gens)), make([]uint64, len(gens))
	for i, g := range gens {
		names[i], seqs[i] = fmt.Sprintf("g%d", g.ID), g.Rec.Seq
	}
	return names, seqs, nil
}

func (h history) Timeline() (string, error) {
	l, err := h.s.Log(true, false)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# reynfs timeline, newest first; head seq %d; * = on the current path\n", l.Head)
	for _, g := range l.Gens {
		mark := " "
		if g.Active {
			mark = "*"
		}
		fmt.Fprintf(&b, "%s g%d\tseq %d\t%s\t%s\t+%d ~%d -%d\t%s\n", mark, g.ID, g.Seq, g.Kind,
			g.Time.UTC().Format(time.RFC3339), g.Changed.Added, g.Changed.Modified, g.Changed.Removed, g.Label)
	}
	fmt.Fprintf(&b, "# browse %[1]s/generations/gN/ or %[1]s/seq/N/ (read-only)\n", h.s.Views)
	return b.String(), nil
}

func (h history) Tree(seq uint64) (*tree.Tree, error) {
	j := h.s.J
	if seq == 0 || seq > j.Head() {
		return nil, fmt.Errorf("view of seq %d: %w", seq, tree.ErrNotExist)
	}
	if seq > j.Durable() {
		if err := j.Sync(); err != nil { // replay reads committed records
			return nil, err
		}
	}
	// The collector keeps the state a view shows for viewHold after the
	// view is built: the kernel reads its files later, from the store.
	if _, err := rewind.Hold(j, seq, viewHold); err != nil {
		if errors.Is(err, rewind.ErrNotRetained) {
			return nil, fmt.Errorf("view of seq %d: %w (%v)", seq, tree.ErrNotExist, err)
		}
		return nil, err
	}
	return rewind.Reconstruct(j, seq)
}

// viewHold is how long a view's state stays retained after it was built.
const viewHold = 30 * time.Minute
