package cas_test

import (
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/castest"
)

// TestPutFresh: PutFresh stores new blobs without looking them up; a
// repeat within the batch is written once; a blob stored already is
// written again (the log grows by its bytes) and still reads back; and
// the objects survive a reopen of the index from the log.
func TestPutFresh(t *testing.T) {
	dir := t.TempDir()
	s, db := newLogged(t, dir)
	a, b := castest.Data(51, 300), castest.Data(52, cas.ChunkSize)
	ha, hb := cas.Sum(a), cas.Sum(b)
	before := s.LogBytes()
	if err := s.PutFresh([]cas.Blob{{Hash: ha, Data: a}, {Hash: hb, Data: b}, {Hash: ha, Data: a}}); err != nil {
		t.Fatalf("PutFresh: %v", err)
	}
	one := s.LogBytes() - before
	if one < int64(len(a)+len(b)) || one >= int64(2*len(a)+len(b)) {
		t.Errorf("PutFresh of a, b, a appended %d bytes; want a and b once (%d bytes of data)", one, len(a)+len(b))
	}
	a[0]++ // the store keeps its own copy once PutFresh returns
	for _, c := range []struct {
		h    cas.Hash
		data []byte
	}{{ha, castest.Data(51, 300)}, {hb, b}} {
		got, err := s.Get(c.h)
		if err != nil || string(got) != string(c.data) {
			t.Fatalf("Get %s after PutFresh: %v (%d bytes)", c.h.Short(), err, len(got))
		}
	}
	before = s.LogBytes()
	if err := s.PutFresh([]cas.Blob{{Hash: hb, Data: b}}); err != nil {
		t.Fatalf("PutFresh of a stored blob: %v", err)
	}
	if s.LogBytes() == before {
		t.Errorf("PutFresh of a stored blob appended nothing: it looked the blob up")
	}
	if err := s.SyncLog(); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseLog(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = newLogged(t, dir)
	if got, err := s.Get(hb); err != nil || string(got) != string(b) {
		t.Fatalf("Get after reopen: %v", err)
	}
}

// TestMemoryPutFresh: the in-memory store's PutFresh keeps copies.
func TestMemoryPutFresh(t *testing.T) {
	m := cas.NewMemory()
	a := castest.Data(53, 100)
	h := cas.Sum(a)
	if err := m.PutFresh([]cas.Blob{{Hash: h, Data: a}}); err != nil {
		t.Fatal(err)
	}
	a[0]++
	if got, err := m.Get(h); err != nil || string(got) != string(castest.Data(53, 100)) {
		t.Fatalf("Get after PutFresh: %v", err)
	}
}
