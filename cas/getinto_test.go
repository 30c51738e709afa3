package cas

import (
	"bytes"
	"errors"
	"testing"
)

// GetOnceInto reads a chunk's delta chain into the caller's buffer: the
// chain's whole bottom goes into dst and the in-place links are applied
// there, so a random writer's read-modify-write needs no buffer of its
// own (fs/tree's staging pools them). The bytes are checked as Get
// checks them, remembered (CRCs) or not; a cached object is shared, not
// copied (into false); damage is ErrCorrupt, whatever dst held.
func TestGetOnceIntoReadsChainIntoBuffer(t *testing.T) {
	s := newLoggedStore(t, t.TempDir())
	v := noise(5, ChunkSize)
	h0, err := s.Put(v)
	if err != nil {
		t.Fatal(err)
	}
	hs, vs := []Hash{h0}, [][]byte{v}
	for i := 1; i < MaxDataChain; i++ {
		next := bytes.Clone(v)
		copy(next[(i%16)*4096:], noise(uint64(200+i), 4096))
		bl := Blob{Hash: Sum(next), Data: next, Base: hs[i-1], BaseData: v}
		if err := s.PutBatch([]Blob{bl}); err != nil {
			t.Fatal(err)
		}
		hs, vs, v = append(hs, bl.Hash), append(vs, next), next
	}
	s.cache.remove(hs)
	top := len(hs) - 1
	if _, loc, _, _, err := s.lookup(hs[top], false); err != nil || loc.Comp != compDelta || loc.Depth < 2 {
		t.Fatalf("top version: %+v, %v: want a delta chain", loc, err)
	}
	for _, remembered := range []bool{true, false} {
		if !remembered {
			s.locs.forget(hs)
		}
		dst := make([]byte, ChunkSize)
		copy(dst, noise(9, ChunkSize)) // what a pooled buffer held before
		got, into, err := s.GetOnceInto(hs[top], dst)
		if err != nil || !bytes.Equal(got, vs[top]) {
			t.Fatalf("remembered %v: %v, equal %v", remembered, err, bytes.Equal(got, vs[top]))
		}
		if !into || !sameArray(got, dst) {
			t.Errorf("remembered %v: into %v, aliases dst %v: want the chain read into dst", remembered, into, sameArray(got, dst))
		}
		if _, ok := s.cache.get(hs[top]); ok {
			t.Errorf("remembered %v: GetOnceInto cached what it read", remembered)
		}
	}
	// A cached object is the cache's: not read into dst.
	if _, err := s.Get(hs[1]); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, ChunkSize)
	if got, into, err := s.GetOnceInto(hs[1], dst); err != nil || into || sameArray(got, dst) || !bytes.Equal(got, vs[1]) {
		t.Fatalf("cached: into %v, aliases %v, %v", into, sameArray(got, dst), err)
	}
	// Damage in the chain's bottom: ErrCorrupt, not dst's bytes.
	s.cache.remove(hs)
	s.locs.forget(hs)
	_, loc, _, _, err := s.lookup(h0, false)
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.log.file(loc.Seg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{^v[100]}, loc.Off+100); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetOnceInto(hs[top], make([]byte, ChunkSize)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged bottom: %v, want ErrCorrupt", err)
	}
}
