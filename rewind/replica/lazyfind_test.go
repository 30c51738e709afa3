package replica

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"

	"github.com/reynfs/reynfs/cas"
)

// TestFindAll checks the sequential pass of findAll against one binary
// search per hash, for a batch small enough to search and one large
// enough to take the pass, with hashes absent, repeated and unsorted.
func TestFindAll(t *testing.T) {
	var entries []lazyEntry
	for i := range 3000 {
		var h cas.Hash
		binary.BigEndian.PutUint64(h[:], uint64(i)*2654435761)
		h[31] = byte(i)
		entries = append(entries, lazyEntry{pack: uint32(i % 7), e: IndexEntry{Hash: h, Off: uint64(i) * 10, Stored: 10, Raw: 10}})
	}
	slices.SortFunc(entries, func(a, b lazyEntry) int { return bytes.Compare(a.e.Hash[:], b.e.Hash[:]) })
	path := filepath.Join(t.TempDir(), "index")
	if err := writeEntries(path, entries); err != nil {
		t.Fatal(err)
	}
	ef, err := openEntries(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ef.f.Close() })
	for _, n := range []int{10, 1500} {
		var hs []cas.Hash
		for i := range n {
			hs = append(hs, entries[(i*7919)%len(entries)].e.Hash)
			if i%5 == 0 {
				var absent cas.Hash
				absent[0], absent[31] = byte(i), 0xff
				hs = append(hs, absent)
			}
		}
		hs = append(hs, hs[0], hs[1]) // repeated
		got, err := ef.findAll(hs)
		if err != nil {
			t.Fatal(err)
		}
		want := map[cas.Hash]lazyEntry{}
		for _, h := range hs {
			le, ok, err := ef.find(h)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				want[h] = le
			}
		}
		seen := map[cas.Hash]bool{}
		for _, le := range got {
			if w, ok := want[le.e.Hash]; !ok || w != le {
				t.Fatalf("n=%d: findAll gave %+v, find gives %+v (found %v)", n, le, w, ok)
			}
			seen[le.e.Hash] = true
		}
		if len(seen) != len(want) {
			t.Errorf("n=%d: findAll found %d distinct hashes, find %d", n, len(seen), len(want))
		}
	}
}
