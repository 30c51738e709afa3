package journal

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

func resetRec(seq, target, supersedes uint64) *Record {
	return &Record{Seq: seq, Op: OpReset, ResetTo: target, Supersedes: supersedes}
}

func mustPath(t *testing.T, rs ...*Record) *Path {
	t.Helper()
	p, err := NewPath(rs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// onPathSet returns the seqs of path(y) by definition: walk prev() from y.
func bruteForce(resets map[uint64]uint64, y uint64) map[uint64]bool {
	on := map[uint64]bool{}
	for cur := y; cur > 0; {
		on[cur] = true
		if n, ok := resets[cur]; ok {
			cur = n
		} else {
			cur--
		}
	}
	return on
}

func seqsOf(p *Path, y uint64) []uint64 {
	var out []uint64
	for _, s := range p.Segments(y) {
		for x := s.From; x <= s.To; x++ {
			out = append(out, x)
		}
	}
	return out
}

func seqs(ranges ...[2]uint64) []uint64 {
	var out []uint64
	for _, r := range ranges {
		for x := r[0]; x <= r[1]; x++ {
			out = append(out, x)
		}
	}
	return out
}

func TestPathNoResets(t *testing.T) {
	p := mustPath(t)
	for _, c := range []struct {
		x, y uint64
		want bool
	}{{1, 1, true}, {1, 10, true}, {10, 10, true}, {11, 10, false}, {0, 10, false}} {
		if got := p.OnPath(c.x, c.y); got != c.want {
			t.Errorf("OnPath(%d, %d) = %v, want %v", c.x, c.y, got, c.want)
		}
	}
	if got := p.Segments(7); !reflect.DeepEqual(got, []Segment{{1, 7}}) {
		t.Errorf("Segments(7) = %v", got)
	}
	if got := p.Segments(0); len(got) != 0 {
		t.Errorf("Segments(0) = %v, want none", got)
	}
	if p.Latest() != 0 {
		t.Errorf("Latest = %d, want 0", p.Latest())
	}
}

// The story: 1..10 written; 11 rewinds to 5; 12, 13 written; 14 rewinds to
// 8 (into the branch 11 abandoned); 15 written; 16 rewinds to 12 (back onto
// the first rewind's branch); 17 undoes 16 (target 15); 18 undoes the very
// first rewind (target 10); 19 rewinds to 0 (empty state); 20 written.
func storyPath(t *testing.T) *Path {
	return mustPath(t,
		resetRec(11, 5, 0), resetRec(14, 8, 11), resetRec(16, 12, 14),
		resetRec(17, 15, 16), resetRec(18, 10, 17), resetRec(19, 0, 18))
}

func TestPathStory(t *testing.T) {
	p := storyPath(t)
	cases := []struct {
		y    uint64
		want []uint64
	}{
		{10, seqs([2]uint64{1, 10})},
		{11, append(seqs([2]uint64{1, 5}), 11)},
		{13, append(seqs([2]uint64{1, 5}), 11, 12, 13)},
		{14, append(seqs([2]uint64{1, 8}), 14)},
		{15, append(seqs([2]uint64{1, 8}), 14, 15)},
		{16, append(seqs([2]uint64{1, 5}), 11, 12, 16)},
		{17, append(seqs([2]uint64{1, 8}), 14, 15, 17)}, // undo of 16 restores 15's state
		{18, append(seqs([2]uint64{1, 10}), 18)},        // undo of the first rewind
		{19, []uint64{19}},
		{20, []uint64{19, 20}},
		// States inside abandoned segments keep their own paths.
		{7, seqs([2]uint64{1, 7})},
		{12, append(seqs([2]uint64{1, 5}), 11, 12)},
	}
	for _, c := range cases {
		if got := seqsOf(p, c.y); !reflect.DeepEqual(got, c.want) {
			t.Errorf("path(%d) = %v, want %v", c.y, got, c.want)
		}
		in := map[uint64]bool{}
		for _, x := range c.want {
			in[x] = true
		}
		for x := uint64(0); x <= 21; x++ {
			if got := p.OnPath(x, c.y); got != in[x] {
				t.Errorf("OnPath(%d, %d) = %v, want %v", x, c.y, got, in[x])
			}
		}
	}
	if !p.Active(15, 17) || p.Active(16, 17) || p.Active(12, 17) {
		t.Error("Active disagrees with OnPath at head 17")
	}
	if p.Latest() != 19 {
		t.Errorf("Latest = %d, want 19", p.Latest())
	}
	if n, ok := p.Target(14); !ok || n != 8 {
		t.Errorf("Target(14) = %d, %v", n, ok)
	}
	if _, ok := p.Target(15); ok {
		t.Error("Target(15) found a reset")
	}
}

func TestPathSegmentsMerge(t *testing.T) {
	// A reset to R-1 where R-1 is the record just before it changes nothing.
	p := mustPath(t, resetRec(5, 4, 0))
	if got := p.Segments(6); !reflect.DeepEqual(got, []Segment{{1, 6}}) {
		t.Errorf("Segments(6) = %v, want [{1 6}]", got)
	}
	p = mustPath(t, resetRec(5, 2, 0), resetRec(8, 6, 5))
	if got := p.Segments(9); !reflect.DeepEqual(got, []Segment{{1, 2}, {5, 6}, {8, 9}}) {
		t.Errorf("Segments(9) = %v", got)
	}
}

func TestPathRandomAgainstDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 300; round++ {
		n := uint64(5 + rng.IntN(60))
		resets := map[uint64]uint64{}
		var recs []*Record
		for s := uint64(2); s <= n; s++ {
			if rng.IntN(4) == 0 {
				target := rng.Uint64N(s)
				resets[s] = target
				recs = append(recs, resetRec(s, target, 0))
			}
		}
		rng.Shuffle(len(recs), func(i, k int) { recs[i], recs[k] = recs[k], recs[i] })
		p := mustPath(t, recs...)
		for y := uint64(0); y <= n+1; y++ {
			want := bruteForce(resets, y)
			for x := uint64(0); x <= n+1; x++ {
				if got := p.OnPath(x, y); got != want[x] {
					t.Fatalf("round %d resets %v: OnPath(%d, %d) = %v, want %v", round, resets, x, y, got, want[x])
				}
			}
			got := seqsOf(p, y)
			if len(got) != len(want) {
				t.Fatalf("round %d: Segments(%d) = %v, want %d seqs", round, y, p.Segments(y), len(want))
			}
			for _, x := range got {
				if !want[x] {
					t.Fatalf("round %d: Segments(%d) holds %d", round, y, x)
				}
			}
		}
	}
}

func TestPathRejects(t *testing.T) {
	bad := [][]*Record{
		{{Seq: 3, Op: OpData}},
		{resetRec(3, 3, 0)},
		{resetRec(3, 4, 0)},
		{resetRec(3, 1, 0), resetRec(3, 2, 0)},
	}
	for _, rs := range bad {
		if _, err := NewPath(rs); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewPath(%v) = %v, want ErrInvalid", rs, err)
		}
	}
	p := mustPath(t, resetRec(5, 2, 0))
	if _, err := p.With(resetRec(4, 1, 0)); !errors.Is(err, ErrInvalid) {
		t.Errorf("With an earlier reset: %v", err)
	}
	q, err := p.With(resetRec(9, 6, 5))
	if err != nil {
		t.Fatal(err)
	}
	if p.Latest() != 5 || q.Latest() != 9 {
		t.Errorf("With changed the original or lost the new reset: %d, %d", p.Latest(), q.Latest())
	}
	if q.OnPath(4, 10) || !q.OnPath(6, 10) || !p.OnPath(7, 10) {
		t.Error("With resolves wrongly")
	}
}
