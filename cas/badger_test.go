package cas_test

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/castest"
)

func openDB(t *testing.T, opts badger.Options) *badger.DB {
	t.Helper()
	db, err := badger.Open(opts.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

func newBadger(t *testing.T) (*cas.Badger, *badger.DB) {
	db := openDB(t, badger.DefaultOptions(t.TempDir()))
	return cas.NewBadger(db), db
}

func TestBadgerConformance(t *testing.T) {
	castest.Run(t, func(t *testing.T) cas.Store {
		s, _ := newBadger(t)
		return s
	})
}

// As the journal opens it: small values in the LSM tree, chunks in the value
// log. Without a cache, so every read is re-hashed.
func TestBadgerConformanceValueLogNoCache(t *testing.T) {
	castest.Run(t, func(t *testing.T) cas.Store {
		db := openDB(t, badger.DefaultOptions(t.TempDir()).WithValueThreshold(1024))
		return cas.NewBadgerCache(db, 0)
	})
}

func TestBadgerKeyLayout(t *testing.T) {
	s, db := newBadger(t)
	d := []byte("hello")
	h, err := s.Put(d)
	if err != nil {
		t.Fatal(err)
	}
	k := cas.Key(h)
	if len(k) != 33 || k[0] != cas.KeyPrefix || !bytes.Equal(k[1:], h[:]) {
		t.Fatalf("Key = %x", k)
	}
	err = db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if !bytes.Equal(v, d) {
				t.Errorf("stored value %q, want %q", v, d)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// overwrite stores wrong bytes under h's key, behind the store's back.
func overwrite(t *testing.T, db *badger.DB, h cas.Hash, v []byte) {
	t.Helper()
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set(cas.Key(h), v) }); err != nil {
		t.Fatal(err)
	}
}

func TestBadgerCorrupt(t *testing.T) {
	for _, threshold := range []int64{1 << 20, 64} { // value in the LSM tree, in the value log
		db := openDB(t, badger.DefaultOptions(t.TempDir()).WithValueThreshold(threshold))
		s := cas.NewBadger(db)
		d := castest.Data(7, 4096)
		h, err := s.Put(d)
		if err != nil {
			t.Fatal(err)
		}
		bad := append([]byte(nil), d...)
		bad[100] ^= 0x40
		overwrite(t, db, h, bad)
		got, err := s.Get(h)
		if !errors.Is(err, cas.ErrCorrupt) {
			t.Fatalf("Get of a flipped byte: err %v, want ErrCorrupt", err)
		}
		if got != nil {
			t.Fatal("Get returned the corrupt bytes")
		}
		if !strings.Contains(err.Error(), h.String()) {
			t.Fatalf("error %q does not name the hash", err)
		}
		// Not cached as good, either.
		if _, err := s.Get(h); !errors.Is(err, cas.ErrCorrupt) {
			t.Fatalf("second Get: %v, want ErrCorrupt", err)
		}
	}
}

func TestBadgerCacheServesVerifiedReads(t *testing.T) {
	s, db := newBadger(t)
	d := castest.Data(8, 1000)
	h, err := s.Put(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(h); err != nil { // verified and cached
		t.Fatal(err)
	}
	overwrite(t, db, h, []byte("damaged after the first read"))
	got, err := s.Get(h)
	if err != nil || !bytes.Equal(got, d) {
		t.Fatalf("hot re-read did not come from the cache: %v", err)
	}
	if _, err := cas.NewBadger(db).Get(h); !errors.Is(err, cas.ErrCorrupt) {
		t.Fatalf("a cold store reads the damage: %v, want ErrCorrupt", err)
	}
}

func TestBadgerAddToBatch(t *testing.T) {
	s, db := newBadger(t)
	old := castest.Data(9, 100)
	if _, err := s.Put(old); err != nil {
		t.Fatal(err)
	}
	fresh := castest.Data(10, 100)
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	if err := wb.Set([]byte("j-record"), []byte("references both blobs")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		data []byte
		want bool
	}{{fresh, true}, {old, false}} {
		written, err := s.AddToBatch(wb, cas.Blob{Hash: cas.Sum(tc.data), Data: tc.data})
		if err != nil || written != tc.want {
			t.Fatalf("AddToBatch = %v, %v; want %v", written, err, tc.want)
		}
	}
	if ok, _ := s.Has(cas.Sum(fresh)); ok {
		t.Fatal("blob visible before the batch is flushed")
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(cas.Sum(fresh))
	if err != nil || !bytes.Equal(got, fresh) {
		t.Fatalf("Get after flush: %v", err)
	}
	wb2 := db.NewWriteBatch()
	defer wb2.Cancel()
	if written, err := s.AddToBatch(wb2, cas.Blob{Hash: cas.Sum(fresh), Data: fresh}); err != nil || written {
		t.Fatalf("AddToBatch of a stored blob = %v, %v; want false", written, err)
	}
}

func TestBadgerStatsAndDelete(t *testing.T) {
	s, db := newBadger(t)
	// A key of another package, sorting right after the object keys.
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("p1"), []byte("x")) }); err != nil {
		t.Fatal(err)
	}
	var hs []cas.Hash
	var total int64
	for i := range 10 {
		d := castest.Data(uint64(i), 10*i)
		h, err := s.Put(d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(d); err != nil { // a dedup'd second Put adds nothing
			t.Fatal(err)
		}
		hs = append(hs, h)
		total += int64(len(d))
	}
	objects, size, err := s.Stats()
	if err != nil || objects != 10 || size != total {
		t.Fatalf("Stats = %d, %d, %v; want 10, %d", objects, size, err, total)
	}
	if _, err := s.Get(hs[3]); err != nil { // cached now
		t.Fatal(err)
	}
	if err := s.Delete(hs[:5]); err != nil {
		t.Fatal(err)
	}
	for i, h := range hs {
		ok, err := s.Has(h)
		if err != nil || ok != (i >= 5) {
			t.Fatalf("Has(%d) after Delete = %v, %v", i, ok, err)
		}
	}
	if _, err := s.Get(hs[3]); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("Get of a deleted, once cached object: %v, want ErrNotFound", err)
	}
	if objects, _, _ := s.Stats(); objects != 5 {
		t.Fatalf("%d objects after Delete, want 5", objects)
	}
	// A Put after the delete writes the object again.
	d := castest.Data(3, 30)
	if _, err := s.Put(d); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(hs[3]); err != nil || !bytes.Equal(got, d) {
		t.Fatalf("Get after re-Put: %v", err)
	}
}

// Many Puts of one new object race in Badger transactions; the losers get
// badger.ErrConflict internally and must retry, not fail.
func TestBadgerPutRace(t *testing.T) {
	db := openDB(t, badger.DefaultOptions(t.TempDir()))
	s := cas.NewBadgerCache(db, 0)
	for round := range 30 {
		d := castest.Data(uint64(round), 1000)
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				if _, err := s.Put(d); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if n, _, err := s.Stats(); err != nil || n != 30 {
		t.Fatalf("Stats = %d, %v; want 30", n, err)
	}
}
