package cas_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/castest"
)

func smallObjects(n int) ([]cas.Blob, map[cas.Hash][]byte) {
	var blobs []cas.Blob
	data := map[cas.Hash][]byte{}
	for i := range n {
		d := bytes.Repeat([]byte(fmt.Sprintf("small file %d: a line of text\n", i)), 60)
		blobs = append(blobs, cas.Blob{Hash: cas.Sum(d), Data: d})
		data[cas.Sum(d)] = d
	}
	return blobs, data
}

func packedCount(t *testing.T, dir string) (packs, objects int) {
	t.Helper()
	err := cas.LogEntries(filepath.Join(dir, "db.log"), func(e cas.LogEntry) error {
		if e.Kind == 'P' {
			packs, objects = packs+1, objects+len(e.Members)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return packs, objects
}

// Small objects committed together are packed (several packs when they
// pass a pack's size) and read back one by one, also after a reopen and
// through a cold cache; Each counts each its share of its pack.
func TestPackedObjectsReadBack(t *testing.T) {
	dir := t.TempDir()
	s, db := openLogged(t, dir)
	blobs, data := smallObjects(100) // ~180 KB raw: 3 packs
	if err := s.PutBatch(blobs); err != nil {
		t.Fatal(err)
	}
	packs, objects := packedCount(t, dir)
	if packs < 3 || objects != 100 {
		t.Fatalf("%d packs of %d objects, want 100 objects in 3 or more", packs, objects)
	}
	var total int64
	if err := s.Each(func(_ cas.Hash, n int64) error { total += n; return nil }); err != nil {
		t.Fatal(err)
	}
	_, segBytes := segments(t, dir)
	if total <= 0 || total > segBytes {
		t.Errorf("Each counts %d bytes for a log of %d", total, segBytes)
	}
	closeLogged(t, s, db)
	s, db = openLogged(t, dir)
	defer closeLogged(t, s, db)
	for h, d := range data {
		got, err := s.Get(h)
		if err != nil || !bytes.Equal(got, d) {
			t.Fatalf("packed object %s: %v", h.Short(), err)
		}
	}
}

// A pack of near-identical small objects can compress to fewer bytes than
// it has objects (516 objects in a 510-byte frame, in an integration test):
// the log's reader must take it, not call it damage (it did: "pack
// count", and fsck failed TestRewindBigDirsChanges's store).
func TestPackOfManyTinyObjects(t *testing.T) {
	dir := t.TempDir()
	s, db := openLogged(t, dir)
	var blobs []cas.Blob
	data := map[cas.Hash][]byte{}
	// Object k is 201 bytes of one 200-byte cycle from phase k: 200
	// different objects whose concatenation is the cycle repeated, which
	// zstd takes to about the cycle's 200 letters of a 4-letter alphabet.
	cycle := make([]byte, 200)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range cycle {
		cycle[i] = "acgt"[rng.IntN(4)]
	}
	for i := range 200 {
		d := make([]byte, 201)
		for k := range d {
			d[k] = cycle[(i+k)%len(cycle)]
		}
		blobs = append(blobs, cas.Blob{Hash: cas.Sum(d), Data: d})
		data[cas.Sum(d)] = d
	}
	if err := s.PutBatch(blobs); err != nil {
		t.Fatal(err)
	}
	closeLogged(t, s, db)
	packs, objects := packedCount(t, dir) // reads every frame as a replay does
	if packs == 0 || objects != len(blobs) {
		t.Fatalf("%d packs of %d objects, want all %d objects packed", packs, objects, len(blobs))
	}
	var largest int
	err := cas.LogEntries(filepath.Join(dir, "db.log"), func(e cas.LogEntry) error {
		if e.Kind == 'P' && len(e.Members) > e.Data {
			largest = max(largest, len(e.Members))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if largest == 0 {
		t.Fatal("no pack holds more objects than its compressed bytes: the case is not made")
	}
	s, db = openLogged(t, dir)
	defer closeLogged(t, s, db)
	for h, d := range data {
		if got, err := s.Get(h); err != nil || !bytes.Equal(got, d) {
			t.Fatalf("object %s: %v", h.Short(), err)
		}
	}
}

// The compactor retires a segment whose packs are mostly dropped: the
// objects still live are copied out of their packs (stored alone), the
// dropped ones stay gone, and everything kept reads back after a reopen.
func TestCompactPacks(t *testing.T) {
	dir := t.TempDir()
	s, db := openLogged(t, dir)
	small, data := smallObjects(60)
	if err := s.PutBatch(small); err != nil {
		t.Fatal(err)
	}
	var drop []cas.Hash
	for i := range 40 { // past the 8 MiB an active segment needs
		h, err := s.Put(castest.Data(uint64(i)+500, 256<<10))
		if err != nil {
			t.Fatal(err)
		}
		drop = append(drop, h)
	}
	keep := []cas.Hash{small[0].Hash, small[31].Hash, small[59].Hash}
	for i, b := range small {
		if i != 0 && i != 31 && i != 59 {
			drop = append(drop, b.Hash)
		}
	}
	s.BeginSweep()
	sw, err := s.Sweep(drop, nil)
	s.EndSweep()
	if err != nil || len(sw.Deleted) != len(drop) {
		t.Fatalf("sweep: %+v, %v", sw, err)
	}
	res, err := s.Compact(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments != 1 || res.Moved != 3 {
		t.Fatalf("compact: %+v, want one segment retired and the 3 kept objects moved", res)
	}
	if packs, _ := packedCount(t, dir); packs != 0 {
		t.Errorf("%d packs left after the compaction, want the kept objects stored alone", packs)
	}
	check := func(s *cas.Badger) {
		t.Helper()
		for _, h := range keep {
			if got, err := s.Get(h); err != nil || !bytes.Equal(got, data[h]) {
				t.Fatalf("kept object %s: %v", h.Short(), err)
			}
		}
		for _, h := range drop[40:] {
			if ok, _ := s.Has(h); ok {
				t.Fatalf("dropped object %s is back", h.Short())
			}
		}
	}
	check(s)
	closeLogged(t, s, db)
	s, db = openLogged(t, dir)
	defer closeLogged(t, s, db)
	check(s)
}

// A damaged byte in a pack is ErrCorrupt for the objects in it (they are
// compressed together), never other bytes, and objects elsewhere still
// read.
func TestDamagedPack(t *testing.T) {
	dir := t.TempDir()
	s, db := openLogged(t, dir)
	small, _ := smallObjects(4)
	if err := s.PutBatch(small); err != nil {
		t.Fatal(err)
	}
	alone := castest.Data(11, 20000)
	other, err := s.Put(alone)
	if err != nil {
		t.Fatal(err)
	}
	closeLogged(t, s, db)
	seg := filepath.Join(dir, "db.log", "0000000000000001.seg")
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The segment header, the first frame's header, the pack entry's
	// header (a few bytes), then its compressed bytes.
	b := make([]byte, 1)
	const at = 64 + 32 + 40
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{^b[0]}, at); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, db = openLogged(t, dir) // the index covers the log: no replay
	defer closeLogged(t, s, db)
	for _, bl := range small {
		if _, err := s.Get(bl.Hash); !errors.Is(err, cas.ErrCorrupt) {
			t.Fatalf("Get of an object in a damaged pack = %v, want ErrCorrupt", err)
		}
	}
	if got, err := s.Get(other); err != nil || !bytes.Equal(got, alone) {
		t.Fatalf("an intact object: %v", err)
	}
}
