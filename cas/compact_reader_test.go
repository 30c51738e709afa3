package cas

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestGetAcrossCompaction: a Get that looked an object up just before the
// compactor moved it and retired its segment (and closed the file, after
// retireDelay) still returns the object, from the copy the index now
// names. It failed with "file already closed" when only retireDelay
// protected such a reader.
func TestGetAcrossCompaction(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenLogged(db, filepath.Join(dir, "db.log"), LogOptions{ID: "0123456789abcdef0123456789abcdef", Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CatchUp(false); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.CloseLog(); err != nil {
			t.Error(err)
		}
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}()
	var all []Hash
	data := map[Hash][]byte{}
	for i := range 40 {
		d := make([]byte, 256<<10) // incompressible: 10 MiB in all, past minRollBytes
		r := rand.New(rand.NewPCG(uint64(i), 7))
		for k := range d {
			d[k] = byte(r.Uint32())
		}
		h, err := s.Put(d)
		if err != nil {
			t.Fatal(err)
		}
		all, data[h] = append(all, h), d
	}
	s.BeginSweep()
	if _, err := s.Sweep(all[10:], nil); err != nil {
		t.Fatal(err)
	}
	s.EndSweep()
	kept := all[3]
	s.cache.remove([]Hash{kept})
	var res CompactResult
	s.afterLookup = func() {
		s.afterLookup = nil
		if res, err = s.Compact(nil, nil); err != nil {
			t.Errorf("compact: %v", err)
		}
		time.Sleep(3 * retireDelay) // the old segment's file is closed now
	}
	got, err := s.Get(kept)
	if res.Segments == 0 {
		t.Fatalf("the compaction moved nothing (%+v): the test needs it to", res)
	}
	if err != nil || !bytes.Equal(got, data[kept]) {
		t.Fatalf("Get across a compaction: %v", err)
	}
}
