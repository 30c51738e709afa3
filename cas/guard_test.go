package cas_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/reynfs/reynfs/cas"
)

// A commit that deduplicates against an object the collector condemned
// (the mark ran before the commit's record existed) must keep it: the
// sweep spares it. Without the guard the object is deleted and the
// record that names it points at nothing.
func TestSweepSparesWhatAWriterDeduped(t *testing.T) {
	s, db := newBadger(t)
	a, err := s.Put([]byte("condemned by the mark, reused by a writer"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Put([]byte("condemned and unused"))
	if err != nil {
		t.Fatal(err)
	}
	s.BeginSweep()
	// The collector's mark found neither a nor b; a writer now commits
	// a record naming a, deduplicating its bytes.
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	written, err := s.AddToBatch(wb, cas.Blob{Hash: a, Data: []byte("condemned by the mark, reused by a writer")})
	if err != nil || written {
		t.Fatalf("AddToBatch of a stored object: written %v, %v", written, err)
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	res, err := s.Sweep([]cas.Hash{a, b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Deleted) != 1 || res.Deleted[0] != b || res.Spared != 1 {
		t.Fatalf("sweep deleted %v, spared %d; want b deleted, a spared", res.Deleted, res.Spared)
	}
	if ok, err := s.Has(a); err != nil || !ok {
		t.Fatalf("the deduplicated object is gone: has %v, %v", ok, err)
	}
	if ok, _ := s.Has(b); ok {
		t.Fatal("the unused condemned object survived the sweep")
	}
	// The next collection does not spare it any more.
	s.EndSweep()
	s.BeginSweep()
	if res, err := s.Sweep([]cas.Hash{a}, nil); err != nil || len(res.Deleted) != 1 {
		t.Fatalf("sweep two epochs on: %+v, %v", res, err)
	}
}

// A writer that looks an object up after the sweep deleted it finds it
// missing and writes it again.
func TestSweepThenWriterRewrites(t *testing.T) {
	s, db := newBadger(t)
	data := []byte("swept, then wanted again")
	h, _ := s.Put(data)
	s.BeginSweep()
	if res, err := s.Sweep([]cas.Hash{h}, nil); err != nil || len(res.Deleted) != 1 {
		t.Fatalf("sweep: %+v, %v", res, err)
	}
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	written, err := s.AddToBatch(wb, cas.Blob{Hash: h, Data: data})
	if err != nil || !written {
		t.Fatalf("AddToBatch after the sweep: written %v, %v", written, err)
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(h); err != nil || string(got) != string(data) {
		t.Fatalf("get after rewrite: %q, %v", got, err)
	}
}

// Writers deduplicating against condemned objects while sweeps run: every
// object a writer's batch committed (written or deduplicated) is there
// afterwards. Run with -race.
func TestSweepRacingWriters(t *testing.T) {
	s, db := newBadger(t)
	const n = 2000
	blobs := make([]cas.Blob, n)
	all := make([]cas.Hash, n)
	for i := range blobs {
		d := []byte(fmt.Sprintf("object %d", i))
		blobs[i] = cas.Blob{Hash: cas.Sum(d), Data: d}
		all[i] = blobs[i].Hash
	}
	if err := s.PutBatch(blobs); err != nil {
		t.Fatal(err)
	}
	s.BeginSweep() // after the initial Puts: they spare nothing
	var wg sync.WaitGroup
	relied := make([][]cas.Hash, 4)
	for w := range relied {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 * 7 {
				wb := db.NewWriteBatch()
				if _, err := s.AddToBatch(wb, blobs[i]); err != nil {
					t.Error(err)
				}
				if err := wb.Flush(); err != nil {
					t.Error(err)
				}
				relied[w] = append(relied[w], blobs[i].Hash)
			}
		}()
	}
	res, err := s.Sweep(all, func() {})
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	for _, hs := range relied {
		for _, h := range hs {
			if ok, err := s.Has(h); err != nil || !ok {
				t.Fatalf("object %s a writer committed is gone (%v)", h.Short(), err)
			}
		}
	}
	if len(res.Deleted)+res.Spared != n {
		t.Fatalf("deleted %d + spared %d != %d", len(res.Deleted), res.Spared, n)
	}
}
