package cas

import (
	"bytes"
	"testing"
)

// A random writer's chunk is a chain of deltas the store remembers
// (rememberWritten); once a version is stored whole (the chain reached
// MaxDataChain) the live tree never reads the old chain again, and its
// remembered locations only push out live ones: the commit that cuts a
// chain drops them. Every version still reads back (from the index).
func TestCutChainForgotten(t *testing.T) {
	s := newLoggedStore(t, t.TempDir())
	v := noise(3, ChunkSize)
	h0, err := s.Put(v)
	if err != nil {
		t.Fatal(err)
	}
	s.cache.remove([]Hash{h0})
	if _, err := s.Get(h0); err != nil { // remembers v0's location
		t.Fatal(err)
	}
	hs, vs := []Hash{h0}, [][]byte{v}
	for i := 1; i <= MaxDataChain+1; i++ {
		next := bytes.Clone(v)
		copy(next[(i%16)*4096:], noise(uint64(100+i), 4096))
		bl := Blob{Hash: Sum(next), Data: next, Base: hs[i-1], BaseData: v}
		if err := s.PutBatch([]Blob{bl}); err != nil {
			t.Fatal(err)
		}
		hs, vs, v = append(hs, bl.Hash), append(vs, next), next
	}
	for i, h := range hs[:len(hs)-1] {
		if _, ok := s.locs.link(h); ok {
			t.Errorf("version %d of the cut chain still remembered", i)
		}
	}
	_, loc, _, _, err := s.lookup(hs[len(hs)-1], false)
	if err != nil || loc.Comp == compDelta {
		t.Fatalf("version %d: %+v, %v: want it stored whole", len(hs)-1, loc, err)
	}
	s.cache.remove(hs)
	for i, h := range hs {
		got, err := s.Get(h)
		if err != nil || !bytes.Equal(got, vs[i]) {
			t.Fatalf("version %d: %v", i, err)
		}
	}
}

// A chain that is extended keeps its remembered links: the next read of
// the chunk walks them.
func TestExtendedChainRemembered(t *testing.T) {
	s := newLoggedStore(t, t.TempDir())
	v := noise(4, ChunkSize)
	h0, err := s.Put(v)
	if err != nil {
		t.Fatal(err)
	}
	hs := []Hash{h0}
	for i := 1; i <= 3; i++ {
		next := bytes.Clone(v)
		copy(next[i*4096:], noise(uint64(200+i), 4096))
		bl := Blob{Hash: Sum(next), Data: next, Base: hs[i-1], BaseData: v}
		if err := s.PutBatch([]Blob{bl}); err != nil {
			t.Fatal(err)
		}
		hs, v = append(hs, bl.Hash), next
	}
	for i, h := range hs[1:] {
		if l, ok := s.locs.link(h); !ok || l.Comp != compDelta {
			t.Errorf("delta %d not remembered", i+1)
		}
	}
}

func TestLocCacheDropChain(t *testing.T) {
	c := newLocCache(16)
	e := c.currentEpoch()
	// 3 -> 2 -> 1 (whole); 9 unrelated.
	c.add(Hash{1}, locEntry{loc: Loc{Comp: compRaw}}, e)
	c.add(Hash{2}, locEntry{loc: Loc{Comp: compDelta, Base: Hash{1}}}, e)
	c.add(Hash{3}, locEntry{loc: Loc{Comp: compDelta, Base: Hash{2}}}, e)
	c.add(Hash{9}, locEntry{loc: Loc{Comp: compRaw}}, e)
	if n := c.dropChain(Hash{3}); n != 3 {
		t.Fatalf("dropped %d, want 3", n)
	}
	if c.len() != 1 || c.currentEpoch() != e {
		t.Fatalf("%d entries left, epoch %d (was %d)", c.len(), c.currentEpoch(), e)
	}
	// A cycle (damage) ends, as a missing link does.
	c.add(Hash{5}, locEntry{loc: Loc{Comp: compDelta, Base: Hash{6}}}, e)
	c.add(Hash{6}, locEntry{loc: Loc{Comp: compDelta, Base: Hash{5}}}, e)
	if n := c.dropChain(Hash{5}); n != 2 {
		t.Fatalf("cycle: dropped %d, want 2", n)
	}
}

// Each remembered delta demotes its base to a link (no CRCs, in the
// compact map); the top keeps its CRCs, reads back, and dropChain follows
// the chain through the links.
func TestChainLinksDemoted(t *testing.T) {
	s := newLoggedStore(t, t.TempDir())
	v := noise(8, ChunkSize)
	h0, err := s.Put(v)
	if err != nil {
		t.Fatal(err)
	}
	s.cache.remove([]Hash{h0})
	if _, err := s.Get(h0); err != nil {
		t.Fatal(err)
	}
	hs, vs := []Hash{h0}, [][]byte{v}
	for i := 1; i <= 4; i++ {
		next := bytes.Clone(v)
		copy(next[i*4096+3:], noise(uint64(300+i), 100))
		bl := Blob{Hash: Sum(next), Data: next, Base: hs[i-1], BaseData: v, Pages: 1 << i}
		if err := s.PutBatch([]Blob{bl}); err != nil {
			t.Fatal(err)
		}
		hs, vs, v = append(hs, bl.Hash), append(vs, next), next
	}
	top := hs[len(hs)-1]
	for i, h := range hs {
		_, inMain := s.locs.get(h)
		_, isLink := s.locs.links[h]
		if want := h == top; inMain != want || isLink == want {
			t.Errorf("version %d: with CRCs %v, link %v", i, inMain, isLink)
		}
	}
	s.cache.remove(hs)
	got, err := s.Get(top)
	if err != nil || !bytes.Equal(got, vs[len(vs)-1]) {
		t.Fatalf("top: %v", err)
	}
	if n := s.locs.dropChain(top); n != len(hs) {
		t.Errorf("dropChain dropped %d, want %d", n, len(hs))
	}
	if len(s.locs.links) != 0 || s.locs.len() != 0 {
		t.Errorf("%d links, %d entries left", len(s.locs.links), s.locs.len())
	}
}

// GetOnce reads and checks like Get but leaves the object cache as it
// was; a cached object is served from there.
func TestGetOnceNotCached(t *testing.T) {
	s := newLoggedStore(t, t.TempDir())
	v := noise(12, ChunkSize)
	h, err := s.Put(v)
	if err != nil {
		t.Fatal(err)
	}
	s.cache.remove([]Hash{h})
	got, err := s.GetOnce(h)
	if err != nil || !bytes.Equal(got, v) {
		t.Fatalf("GetOnce: %v", err)
	}
	if s.cache.contains(h) {
		t.Fatal("GetOnce cached what it read")
	}
	if _, err := s.Get(h); err != nil || !s.cache.contains(h) {
		t.Fatalf("Get: %v, cached %v", err, s.cache.contains(h))
	}
	if got, err := s.GetOnce(h); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("GetOnce from the cache: %v", err)
	}
}
