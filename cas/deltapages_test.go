package cas

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// DeltaPages makes the same target as Delta, from a compare of the changed
// pages only, at about Delta's size; any mix of changed pages, edits
// shorter than a page, edits that write the same bytes again and a short
// last page.
func TestDeltaPages(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for c := range 300 {
		size := ChunkSize
		if c%5 == 4 {
			size = 5*pageSize + rng.IntN(pageSize)
		}
		base := noise(uint64(c), size)
		target := bytes.Clone(base)
		pages := (size + pageSize - 1) / pageSize
		var changed uint64
		for range 1 + rng.IntN(4) {
			p := rng.IntN(pages)
			changed |= 1 << p
			start := min(p*pageSize+rng.IntN(pageSize), size-1)
			end := min(start+1+rng.IntN(2*pageSize), size) // may spill into the next page
			for q := p; q <= (end-1)/pageSize; q++ {
				changed |= 1 << q
			}
			if rng.IntN(4) > 0 {
				copy(target[start:end], noise(uint64(1000+c), end-start))
			} // else: a write of the same bytes
		}
		if c%7 == 0 {
			changed |= 1 << rng.IntN(pages) // a page written but not changed
		}
		d := DeltaPages(base, target, changed)
		got, err := Undelta(base, d, size)
		if err != nil || !bytes.Equal(got, target) {
			t.Fatalf("case %d (pages %b): %v, target differs", c, changed, err)
		}
		if full := Delta(base, target); len(d) > len(full)+32 {
			t.Errorf("case %d: %d bytes, Delta %d", c, len(d), len(full))
		}
	}
}

// The store takes a writer's changed pages (Blob.Pages) for a small
// delta, and when the writer missed a changed page it notices by the
// page CRCs and compares the whole chunk: either way the version reads
// back exactly.
func TestStorePagesChecked(t *testing.T) {
	for _, lie := range []bool{false, true} {
		s := newLoggedStore(t, t.TempDir())
		v0 := noise(5, ChunkSize)
		h0, err := s.Put(v0)
		if err != nil {
			t.Fatal(err)
		}
		s.cache.remove([]Hash{h0})
		if _, err := s.Get(h0); err != nil { // remembers v0's page CRCs
			t.Fatal(err)
		}
		v1 := bytes.Clone(v0)
		copy(v1[3*pageSize+100:], noise(6, 500))
		copy(v1[9*pageSize:], noise(7, 64)) // page 9
		pages := uint64(1<<3 | 1<<9)
		if lie {
			pages = 1 << 3 // page 9 missed
		}
		bl := Blob{Hash: Sum(v1), Data: v1, Base: h0, BaseData: v0, Pages: pages}
		if err := s.PutBatch([]Blob{bl}); err != nil {
			t.Fatal(err)
		}
		_, loc, _, _, err := s.lookup(bl.Hash, false)
		if err != nil || loc.Comp != compDelta || loc.Stored > 1000 {
			t.Fatalf("lie=%v: stored %+v, %v: want a delta of some 600 bytes", lie, loc, err)
		}
		s.cache.remove([]Hash{bl.Hash})
		s.locs.forget([]Hash{bl.Hash})
		got, err := s.Get(bl.Hash)
		if err != nil || !bytes.Equal(got, v1) {
			t.Fatalf("lie=%v: %v, differs", lie, err)
		}
	}
}
