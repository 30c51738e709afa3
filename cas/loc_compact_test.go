package cas_test

import (
	"bytes"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/castest"
)

// TestCompactFixedEntries: a store upgraded from format 5 holds
// fixed-width index entries; the compactor moves their objects as any
// (it compared the entry's bytes with a re-encoding, so it took every
// old entry for one changed meanwhile and moved nothing), and writes
// their new entries compact.
func TestCompactFixedEntries(t *testing.T) {
	dir := t.TempDir()
	s, db := openLogged(t, dir)
	var all []cas.Hash
	data := map[cas.Hash][]byte{}
	for i := range 40 {
		d := castest.Data(uint64(i)+300, 256<<10)
		h, err := s.Put(d)
		if err != nil {
			t.Fatal(err)
		}
		all, data[h] = append(all, h), d
	}
	closeLogged(t, s, db)
	s, db = openLogged(t, dir)
	if n, err := cas.RewriteIndexFixed(db); err != nil || n != 40 {
		t.Fatalf("rewrite index: %d, %v", n, err)
	}
	closeLogged(t, s, db)
	s, db = openLogged(t, dir) // no cached locations
	defer func() { closeLogged(t, s, db) }()
	for _, h := range all {
		if got, err := s.Get(h); err != nil || !bytes.Equal(got, data[h]) {
			t.Fatalf("read through a fixed-width entry: %v", err)
		}
	}
	s.BeginSweep()
	sw, err := s.Sweep(all[10:], nil)
	s.EndSweep()
	if err != nil || len(sw.Deleted) != 30 {
		t.Fatalf("sweep: %+v, %v", sw, err)
	}
	res, err := s.Compact(nil, nil)
	if err != nil || res.Segments != 1 || res.Moved != 10 {
		t.Fatalf("compact: %+v, %v", res, err)
	}
	closeLogged(t, s, db)
	s, db = openLogged(t, dir)
	for _, h := range all[:10] {
		if got, err := s.Get(h); err != nil || !bytes.Equal(got, data[h]) {
			t.Fatalf("kept object after compaction: %v", err)
		}
		if c, err := cas.IndexEntryCompact(db, h); err != nil || !c {
			t.Fatalf("moved object's index entry compact = %v, %v", c, err)
		}
	}
}
