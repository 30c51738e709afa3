package cas_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/castest"
)

// TestDeltaAligned: a chunk with a few 4 KiB pages rewritten in place (a
// random writer, a database) is a delta of about the bytes that changed,
// found by the aligned compare, and it decodes back.
func TestDeltaAligned(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	base := castest.Data(5, cas.ChunkSize)
	for _, pages := range []int{1, 2, 5} {
		target := bytes.Clone(base)
		for range pages {
			off := rng.IntN(cas.ChunkSize/4096) * 4096
			copy(target[off:], castest.Data(rng.Uint64(), 4096))
		}
		d := cas.Delta(base, target)
		if len(d) > pages*4096+64 {
			t.Errorf("%d pages changed: delta of %d bytes", pages, len(d))
		}
		got, err := cas.Undelta(base, d, cas.ChunkSize)
		if err != nil || !bytes.Equal(got, target) {
			t.Fatalf("%d pages: undelta: %v", pages, err)
		}
	}
	// Equal lengths but shifted content still decodes (copies are only
	// taken where the bytes are equal).
	shifted := append(bytes.Clone(base[1:]), 7)
	got, err := cas.Undelta(base, cas.Delta(base, shifted), cas.ChunkSize)
	if err != nil || !bytes.Equal(got, shifted) {
		t.Fatalf("shifted: %v", err)
	}
}

// TestDeltaBaseData: file chunks come with their base's bytes (the live
// tree's read-modify-write has them): a line of 4 KiB appends and page
// rewrites is stored as deltas of about 4 KiB, a chain of more than
// MaxDataChain versions included (one in MaxDataChain+1 is whole), and
// every version reads back from a fresh open. A chunk marked Chunk
// without its BaseData (a file rewritten after a truncation: the store
// reads the base itself) is bounded the same way, not by MaxChain.
func TestDeltaBaseData(t *testing.T) {
	t.Run("BaseData", func(t *testing.T) { testDeltaBaseData(t, true) })
	t.Run("Chunk", func(t *testing.T) { testDeltaBaseData(t, false) })
}

func testDeltaBaseData(t *testing.T, withData bool) {
	dir := t.TempDir()
	s, db := openLogged(t, dir)
	rng := rand.New(rand.NewPCG(1, 2))
	var vs [][]byte
	cur := castest.Data(9, 4096)
	for i := range 2*cas.MaxDataChain + 3 {
		next := bytes.Clone(cur)
		if len(next) < cas.ChunkSize {
			next = append(next, castest.Data(uint64(100+i), 4096)...)
		} else {
			off := rng.IntN(cas.ChunkSize/4096) * 4096
			copy(next[off:], castest.Data(uint64(100+i), 4096))
		}
		vs = append(vs, next)
		cur = next
	}
	hs := make([]cas.Hash, len(vs))
	for i, v := range vs {
		bl := cas.Blob{Hash: cas.Sum(v), Data: v}
		if i > 0 {
			bl.Base = hs[i-1]
			if withData {
				bl.BaseData = vs[i-1]
			} else {
				bl.Chunk = true
			}
		}
		if err := s.PutBatch([]cas.Blob{bl}); err != nil {
			t.Fatal(err)
		}
		hs[i] = bl.Hash
	}
	sizes := storedSizes(t, s)
	small := 0
	for i, h := range hs {
		if sizes[h] <= 4096+200 {
			small++
		} else if i > 0 && len(vs[i]) > 16<<10 && sizes[h] < int64(len(vs[i])) {
			t.Errorf("version %d: %d bytes stored, neither whole nor a small delta", i, sizes[h])
		}
	}
	// The first version and one in MaxDataChain+1 after it are whole.
	if whole, want := len(hs)-small, (len(hs)+cas.MaxDataChain)/(cas.MaxDataChain+1); whole != want {
		t.Errorf("%d of %d versions stored whole, want %d (MaxDataChain %d)", whole, len(hs), want, cas.MaxDataChain)
	}
	closeLogged(t, s, db)
	s, db = openLogged(t, dir)
	defer closeLogged(t, s, db)
	checkVersions(t, s, hs, vs)
}

// BenchmarkDeltaChunkPage: the delta of a 64 KiB file chunk with one
// 4 KiB page rewritten (what a random writer's fsync stores).
func BenchmarkDeltaChunkPage(b *testing.B) {
	base := castest.Data(5, cas.ChunkSize)
	target := bytes.Clone(base)
	copy(target[24<<10:], castest.Data(6, 4096))
	b.SetBytes(cas.ChunkSize)
	for b.Loop() {
		cas.Delta(base, target)
	}
}

// TestDeltaBaseDeleted: the committer takes a chunk's base from the
// remembered locations (baseLoc) when it can, which must not outlive a
// delete: a base the collector deleted after it was read is no base, and
// the next version is stored whole, not as a delta on a missing object.
func TestDeltaBaseDeleted(t *testing.T) {
	dir := t.TempDir()
	s, db := openLogged(t, dir)
	v0 := castest.Data(21, cas.ChunkSize)
	h0, err := s.Put(v0)
	if err != nil {
		t.Fatal(err)
	}
	v1 := bytes.Clone(v0)
	copy(v1[8192:], castest.Data(22, 4096))
	b1 := cas.Blob{Hash: cas.Sum(v1), Data: v1, Base: h0, BaseData: v0}
	if err := s.PutBatch([]cas.Blob{b1}); err != nil {
		t.Fatal(err)
	}
	if sizes := storedSizes(t, s); sizes[b1.Hash] > 4096+200 {
		t.Fatalf("version 1: %d bytes stored, want a delta", sizes[b1.Hash])
	}
	// v1's location is remembered (Commit); drop v1 and v0 as a sweep would.
	if err := s.Delete([]cas.Hash{b1.Hash, h0}); err != nil {
		t.Fatal(err)
	}
	v2 := bytes.Clone(v1)
	copy(v2[16384:], castest.Data(23, 4096))
	b2 := cas.Blob{Hash: cas.Sum(v2), Data: v2, Base: b1.Hash, BaseData: v1}
	if err := s.PutBatch([]cas.Blob{b2}); err != nil {
		t.Fatal(err)
	}
	if sizes := storedSizes(t, s); sizes[b2.Hash] < cas.ChunkSize/2 {
		t.Errorf("version 2: %d bytes stored, a delta on a deleted base", sizes[b2.Hash])
	}
	closeLogged(t, s, db)
	s, db = openLogged(t, dir)
	defer closeLogged(t, s, db)
	checkVersions(t, s, []cas.Hash{b2.Hash}, [][]byte{v2})
}
