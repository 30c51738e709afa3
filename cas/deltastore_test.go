package cas_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/castest"
)

// versions returns n versions of a 4 KB directory-like object, each one a
// few bytes off the one before (a child's 32-byte hash rewritten).
func versions(n int) [][]byte {
	v := castest.Data(77, 4000)
	out := make([][]byte, n)
	for i := range out {
		v = bytes.Clone(v)
		copy(v[(i*97)%3900:], castest.Data(uint64(1000+i), 32))
		out[i] = v
	}
	return out
}

// putVersions stores each version with the one before it as its Base,
// one commit each (as checkpoints do).
func putVersions(t *testing.T, s *cas.Badger, vs [][]byte) []cas.Hash {
	t.Helper()
	hs := make([]cas.Hash, len(vs))
	for i, v := range vs {
		bl := cas.Blob{Hash: cas.Sum(v), Data: v}
		if i > 0 {
			bl.Base = hs[i-1]
		}
		if err := s.PutBatch([]cas.Blob{bl}); err != nil {
			t.Fatal(err)
		}
		hs[i] = bl.Hash
	}
	return hs
}

func storedSizes(t *testing.T, s *cas.Badger) map[cas.Hash]int64 {
	t.Helper()
	m := map[cas.Hash]int64{}
	if err := s.Each(func(h cas.Hash, n int64) error { m[h] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return m
}

func checkVersions(t *testing.T, s *cas.Badger, hs []cas.Hash, vs [][]byte) {
	t.Helper()
	for i, h := range hs {
		got, err := s.Get(h)
		if err != nil || !bytes.Equal(got, vs[i]) {
			t.Fatalf("version %d: %d bytes, %v", i, len(got), err)
		}
	}
}

// TestDeltaChains: versions with a Base are stored as deltas, a whole
// object every MaxChain+1 versions; every version reads back from a fresh
// open (no cache), and again after the index lost them and catch-up
// rebuilt it from the log's delta entries.
func TestDeltaChains(t *testing.T) {
	dir := t.TempDir()
	s, db := openLogged(t, dir)
	n := 2*cas.MaxChain + 5
	vs := versions(n)
	hs := putVersions(t, s, vs)
	sizes := storedSizes(t, s)
	whole := 0
	for i, h := range hs {
		if sizes[h] > 1000 {
			whole++
		} else if sizes[h] > 100 {
			t.Errorf("version %d stored in %d bytes", i, sizes[h])
		}
	}
	if want := (n + cas.MaxChain) / (cas.MaxChain + 1); whole != want {
		t.Errorf("%d of %d versions stored whole, want %d (MaxChain %d)", whole, n, want, cas.MaxChain)
	}
	closeLogged(t, s, db)

	s, db = openLogged(t, dir)
	checkVersions(t, s, hs, vs)
	// Lose the index of every object and the position it covers: catch-up
	// replays the whole log, delta entries included.
	err := db.DropPrefix([]byte{cas.LogPrefix})
	if err == nil {
		err = db.Update(func(txn *badger.Txn) error {
			pos := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 1), 64)
			return txn.Set(cas.KeyLogPos, pos)
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	closeLogged(t, s, db)
	s, db = openLogged(t, dir)
	defer closeLogged(t, s, db)
	checkVersions(t, s, hs, vs)
	if again := storedSizes(t, s); fmt.Sprint(again) != fmt.Sprint(sizes) {
		t.Fatal("catch-up rebuilt other index entries than the commits wrote")
	}
}

// TestDeltaNotWorthIt: a Base that is missing, or that shares nothing
// with the object, leaves the object whole.
func TestDeltaNotWorthIt(t *testing.T) {
	s, _ := newLogged(t, t.TempDir())
	a, b := castest.Data(1, 4000), castest.Data(2, 4000)
	ha, err := s.Put(a)
	if err != nil {
		t.Fatal(err)
	}
	blobs := []cas.Blob{
		{Hash: cas.Sum(b), Data: b, Base: ha},
		{Hash: cas.Sum(a[:3000]), Data: a[:3000], Base: cas.Sum([]byte("not stored"))},
	}
	if err := s.PutBatch(blobs); err != nil {
		t.Fatal(err)
	}
	sizes := storedSizes(t, s)
	for _, bl := range blobs {
		if sizes[bl.Hash] != int64(len(bl.Data)) {
			t.Errorf("object of %d bytes stored in %d, want whole", len(bl.Data), sizes[bl.Hash])
		}
	}
}

// TestSweepKeepsDeltaBases: a sweep that condemns the bases of a delta it
// keeps keeps them (the closure), so the kept delta still reads back from
// a fresh open; condemning the delta too drops all of them, the delta
// first. Without the closure the first sweep deletes v0 and v1 and v2 is
// unreadable.
func TestSweepKeepsDeltaBases(t *testing.T) {
	dir := t.TempDir()
	s, db := openLogged(t, dir)
	vs := versions(3)
	hs := putVersions(t, s, vs)
	if sz := storedSizes(t, s); sz[hs[1]] > 100 || sz[hs[2]] > 100 {
		t.Fatalf("versions not stored as deltas: %v", sz)
	}
	s.BeginSweep()
	sw, err := s.Sweep(hs[:2], nil)
	s.EndSweep()
	if err != nil || len(sw.Deleted) != 0 || sw.Bases != 2 {
		t.Fatalf("sweep of the bases of a kept delta: %+v, %v", sw, err)
	}
	closeLogged(t, s, db)
	s, db = openLogged(t, dir)
	defer closeLogged(t, s, db)
	checkVersions(t, s, hs, vs)

	s.BeginSweep()
	sw, err = s.Sweep(hs, nil)
	s.EndSweep()
	if err != nil || fmt.Sprint(sw.Deleted) != fmt.Sprint([]cas.Hash{hs[2], hs[1], hs[0]}) {
		t.Fatalf("sweep of the whole chain: %+v, %v", sw, err)
	}
	for _, h := range hs {
		if ok, _ := s.Has(h); ok {
			t.Fatal("a swept version is still there")
		}
	}
}

// TestSweepKeepsTouchedDeltaBases: a delta a writer deduplicates against
// while a sweep runs is spared, and so is its chain, condemned or not.
func TestSweepKeepsTouchedDeltaBases(t *testing.T) {
	dir := t.TempDir()
	s, db := openLogged(t, dir)
	vs := versions(3)
	hs := putVersions(t, s, vs)
	s.BeginSweep()
	if _, err := s.Put(vs[2]); err != nil { // a dedup: noted
		t.Fatal(err)
	}
	sw, err := s.Sweep(hs, nil)
	s.EndSweep()
	if err != nil || len(sw.Deleted) != 0 || sw.Spared != 1 || sw.Bases != 2 {
		t.Fatalf("sweep: %+v, %v", sw, err)
	}
	closeLogged(t, s, db)
	s, db = openLogged(t, dir)
	defer closeLogged(t, s, db)
	checkVersions(t, s, hs, vs)
}

// TestCompactMovesDeltas: a compaction that copies deltas and their bases
// forward keeps them deltas, and they read back after a reopen.
func TestCompactMovesDeltas(t *testing.T) {
	dir := t.TempDir()
	s, db := openLogged(t, dir)
	vs := versions(10)
	hs := putVersions(t, s, vs)
	var garbage []cas.Hash
	for i := range 40 {
		h, err := s.Put(castest.Data(uint64(i)+500, 256<<10))
		if err != nil {
			t.Fatal(err)
		}
		garbage = append(garbage, h)
	}
	before := storedSizes(t, s)
	s.BeginSweep()
	_, err := s.Sweep(garbage, nil)
	s.EndSweep()
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Compact(nil, nil)
	if err != nil || res.Moved != len(hs) {
		t.Fatalf("compact: %+v, %v", res, err)
	}
	after := storedSizes(t, s)
	for _, h := range hs {
		if after[h] != before[h] {
			t.Fatalf("a moved object changed its stored size: %d -> %d", before[h], after[h])
		}
	}
	closeLogged(t, s, db)
	s, db = openLogged(t, dir)
	defer closeLogged(t, s, db)
	checkVersions(t, s, hs, vs)
}

// TestDeltaMissingBase: a delta whose base is gone is ErrCorrupt (damage
// of that object), never a panic or wrong bytes.
func TestDeltaMissingBase(t *testing.T) {
	dir := t.TempDir()
	s, db := openLogged(t, dir)
	vs := versions(3)
	hs := putVersions(t, s, vs)
	if err := s.Delete(hs[:1]); err != nil { // what a sweep without the closure did
		t.Fatal(err)
	}
	closeLogged(t, s, db)
	s, db = openLogged(t, dir)
	defer closeLogged(t, s, db)
	for _, h := range hs[1:] {
		if _, err := s.Get(h); err == nil || !errorsIsCorrupt(err) {
			t.Fatalf("Get of a delta whose base is gone = %v, want ErrCorrupt", err)
		}
	}
}

func errorsIsCorrupt(err error) bool { return errors.Is(err, cas.ErrCorrupt) }
