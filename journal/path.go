package journal

import (
	"fmt"
	"slices"
	"sort"
)

// Path answers which records make up the state at a seq, from the reset
// records (ADR-0038 "Reset-record + active-pointer semantics").
//
// The state at y is the records on y's own path. When y was appended the
// live state was the state at y-1, so path(y) = {y} ∪ path(y-1) for a plain
// record; a reset record R with target N makes the state at N live again,
// so path(R) = {R} ∪ path(N). Unrolled, a reset at R abandons the segment
// (N, R) for every point at or after R on its path; nested resets compose
// latest-first because the walk from y meets the latest reset first; a seq
// inside an abandoned segment has the path it had when it was written; and
// undoing a rewind at R is a reset to R-1, whose path still holds the
// discarded future. Seq 0 is the empty state before the first record.
//
// A Path is immutable and safe for concurrent use; With returns a new one.
type Path struct {
	resets []reset // sorted by seq
}

type reset struct {
	seq, target, supersedes uint64
}

// Segment is an inclusive range of seqs on one path.
type Segment struct {
	From, To uint64
}

// NewPath builds a Path from reset records in any order. Errors wrap
// ErrInvalid: a record that is not OpReset, a target not below its seq, two
// resets with the same seq.
func NewPath(resets []*Record) (*Path, error) {
	p := &Path{resets: make([]reset, 0, len(resets))}
	for _, r := range resets {
		if err := checkReset(r); err != nil {
			return nil, fmt.Errorf("path: %w", err)
		}
		p.resets = append(p.resets, reset{r.Seq, r.ResetTo, r.Supersedes})
	}
	slices.SortFunc(p.resets, func(a, b reset) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	for i := 1; i < len(p.resets); i++ {
		if p.resets[i].seq == p.resets[i-1].seq {
			return nil, fmt.Errorf("path: %w: two resets at seq %d", ErrInvalid, p.resets[i].seq)
		}
	}
	return p, nil
}

func checkReset(r *Record) error {
	if r.Op != OpReset {
		return fmt.Errorf("%w: seq %d is a %s record, not a reset", ErrInvalid, r.Seq, r.Op)
	}
	if r.ResetTo >= r.Seq {
		return fmt.Errorf("%w: reset at seq %d targets seq %d, not an earlier one", ErrInvalid, r.Seq, r.ResetTo)
	}
	return nil
}

// With returns p plus one reset record whose seq is above every reset in p
// (the daemon extends its Path as it appends a reset).
func (p *Path) With(r *Record) (*Path, error) {
	if err := checkReset(r); err != nil {
		return nil, fmt.Errorf("path: %w", err)
	}
	if n := len(p.resets); n > 0 && r.Seq <= p.resets[n-1].seq {
		return nil, fmt.Errorf("path: %w: reset at seq %d is not after the last reset %d", ErrInvalid, r.Seq, p.resets[n-1].seq)
	}
	q := &Path{resets: make([]reset, len(p.resets), len(p.resets)+1)}
	copy(q.resets, p.resets)
	q.resets = append(q.resets, reset{r.Seq, r.ResetTo, r.Supersedes})
	return q, nil
}

// Latest is the active pointer: the seq of the latest reset record, 0 if
// there is none. A new reset record supersedes it.
func (p *Path) Latest() uint64 {
	if len(p.resets) == 0 {
		return 0
	}
	return p.resets[len(p.resets)-1].seq
}

// Target returns the target of the reset record at seq, if there is one.
func (p *Path) Target(seq uint64) (uint64, bool) {
	i := sort.Search(len(p.resets), func(i int) bool { return p.resets[i].seq >= seq })
	if i < len(p.resets) && p.resets[i].seq == seq {
		return p.resets[i].target, true
	}
	return 0, false
}

// lastAtOrBelow returns the latest reset with seq <= s.
func (p *Path) lastAtOrBelow(s uint64) (reset, bool) {
	i := sort.Search(len(p.resets), func(i int) bool { return p.resets[i].seq > s })
	if i == 0 {
		return reset{}, false
	}
	return p.resets[i-1], true
}

// OnPath reports whether record x is part of the state at seq y.
func (p *Path) OnPath(x, y uint64) bool {
	if x == 0 || x > y {
		return false
	}
	cur := y
	for {
		r, ok := p.lastAtOrBelow(cur)
		if !ok || r.seq <= x {
			return true // cur descends record by record down to x
		}
		if r.target < x {
			return false // the walk jumps over x and never climbs back
		}
		cur = r.target
	}
}

// Active reports whether record seq belongs to the live state at head.
func (p *Path) Active(seq, head uint64) bool { return p.OnPath(seq, head) }

// Segments returns y's path as ascending, disjoint, non-adjacent inclusive
// ranges of seqs (reset records included): replaying the records in them in
// order, skipping resets, reproduces the state at y.
func (p *Path) Segments(y uint64) []Segment {
	var segs []Segment
	cur := y
	for cur > 0 {
		r, ok := p.lastAtOrBelow(cur)
		if !ok {
			segs = append(segs, Segment{1, cur})
			break
		}
		segs = append(segs, Segment{r.seq, cur})
		cur = r.target
	}
	slices.Reverse(segs)
	out := segs[:0]
	for _, s := range segs {
		if n := len(out); n > 0 && out[n-1].To+1 == s.From {
			out[n-1].To = s.To
			continue
		}
		out = append(out, s)
	}
	return out
}
