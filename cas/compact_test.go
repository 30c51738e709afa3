package cas_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/castest"
)

// openLogged opens (or reopens) the logged store in dir without cleanup.
func openLogged(t *testing.T, dir string) (*cas.Badger, *badger.DB) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	s, err := cas.OpenLogged(db, filepath.Join(dir, "db.log"), cas.LogOptions{ID: "0123456789abcdef0123456789abcdef", Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CatchUp(false); err != nil {
		t.Fatal(err)
	}
	return s, db
}

func closeLogged(t *testing.T, s *cas.Badger, db *badger.DB) {
	t.Helper()
	if err := s.CloseLog(); err != nil {
		t.Error(err)
	}
	if err := db.Close(); err != nil {
		t.Error(err)
	}
}

func segments(t *testing.T, dir string) (names []string, bytes int64) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "db.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".seg") {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			names, bytes = append(names, e.Name()), bytes+fi.Size()
		}
	}
	return names, bytes
}

// TestCompact: after a sweep dropped most objects, Compact seals the
// mostly-garbage active segment, copies the live objects forward and
// removes it: the segment bytes go, every kept object reads back (also
// after a reopen, through the index alone), the dropped ones stay gone,
// and a second Compact finds nothing to do.
func TestCompact(t *testing.T) {
	dir := t.TempDir()
	s, db := openLogged(t, dir)
	var all []cas.Hash
	data := map[cas.Hash][]byte{}
	for i := range 40 {
		d := castest.Data(uint64(i)+100, 256<<10)
		h, err := s.Put(d)
		if err != nil {
			t.Fatal(err)
		}
		all, data[h] = append(all, h), d
	}
	before, err := cas.LogicalLogBytes(s) // less the prefill (prefill.go)
	if err != nil {
		t.Fatal(err)
	}
	s.BeginSweep()
	sw, err := s.Sweep(all[10:], nil)
	s.EndSweep()
	if err != nil || len(sw.Deleted) != 30 {
		t.Fatalf("sweep: %+v, %v", sw, err)
	}
	res, err := s.Compact(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	names, _ := segments(t, dir)
	after, err := cas.LogicalLogBytes(s)
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments != 1 || res.Moved != 10 || after > before/3 || len(names) != 1 {
		t.Fatalf("compact: %+v; segments %v, %d bytes (were %d)", res, names, after, before)
	}
	check := func(s *cas.Badger) {
		t.Helper()
		for i, h := range all {
			got, err := s.Get(h)
			if i < 10 && (err != nil || !bytes.Equal(got, data[h])) {
				t.Fatalf("kept object %d after compaction: %v", i, err)
			}
			if ok, _ := s.Has(h); i >= 10 && ok {
				t.Fatalf("dropped object %d is back", i)
			}
		}
	}
	check(s)
	if again, err := s.Compact(nil, nil); err != nil || again.Segments != 0 {
		t.Fatalf("second compact: %+v, %v", again, err)
	}
	closeLogged(t, s, db)
	s, db = openLogged(t, dir)
	defer closeLogged(t, s, db)
	check(s)
}
