package cas

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

const testID = "0123456789abcdef0123456789abcdef"

func openTestLog(t *testing.T, dir string) (*Badger, *badger.DB) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenLogged(db, filepath.Join(dir, "db.log"), LogOptions{ID: testID, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CatchUp(false); err != nil {
		_ = db.Close()
		t.Fatal(err)
	}
	return s, db
}

// The writer rolls to a new segment when a frame would pass the size;
// objects in every segment read back, also after a reopen whose index
// lost its position (replayed across segments); a missing segment in the
// part to replay is damage naming it.
func TestSegmentsRoll(t *testing.T) {
	defer func(n int64) { segmentSize = n }(segmentSize)
	segmentSize = 4096
	dir := t.TempDir()
	s, db := openTestLog(t, dir)
	var hs []Hash
	for i := range 40 {
		data := make([]byte, 500)
		r := rand.New(rand.NewPCG(uint64(i), 1))
		for k := range data {
			data[k] = byte(r.Uint32())
		}
		h, err := s.Put(data)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	segs, err := listSegments(filepath.Join(dir, "db.log"))
	if err != nil || len(segs) < 3 {
		t.Fatalf("segments %v (%v), want several", segs, err)
	}
	if err := s.SyncLog(); err != nil {
		t.Fatal(err)
	}
	// The index forgets its position: a reopen replays every segment.
	if err := db.Update(func(txn *badger.Txn) error { return txn.Delete(KeyLogPos) }); err != nil {
		t.Fatal(err)
	}
	_ = s.CloseLog()
	_ = db.Close()
	s, db = openTestLog(t, dir)
	for _, h := range hs {
		if _, err := s.Get(h); err != nil {
			t.Fatalf("Get after the replay: %v", err)
		}
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Delete(KeyLogPos) }); err != nil {
		t.Fatal(err)
	}
	_ = s.CloseLog()
	_ = db.Close()
	missing := filepath.Join(dir, "db.log", segName(segs[1]))
	if err := os.Remove(missing); err != nil {
		t.Fatal(err)
	}
	db, err = badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err = OpenLogged(db, filepath.Join(dir, "db.log"), LogOptions{ID: testID})
	if err != nil {
		t.Fatal(err)
	}
	defer s.CloseLog()
	if _, err := s.CatchUp(false); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), segName(segs[1])) {
		t.Fatalf("catch-up with a segment missing = %v, want ErrDamaged naming %s", err, segName(segs[1]))
	}
}

// A segment of another store is damage, never replayed into this one.
func TestSegmentOfAnotherStore(t *testing.T) {
	dir := t.TempDir()
	s, db := openTestLog(t, dir)
	if _, err := s.Put([]byte("x")); err != nil {
		t.Fatal(err)
	}
	_ = s.CloseLog()
	if err := db.Update(func(txn *badger.Txn) error { return txn.Delete(KeyLogPos) }); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	o, err := OpenLogged(db, filepath.Join(dir, "db.log"), LogOptions{ID: "ffffffffffffffffffffffffffffffff", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer o.CloseLog()
	if _, err := o.CatchUp(false); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "segment of store "+testID) {
		t.Fatalf("catch-up of another store's segment = %v", err)
	}
}
