package journal

import (
	"errors"
	"testing"
)

// TestEnqueueAt: a record takes the seq it carries when that is above
// head, the skipped seqs stay holes, a seq at or below head is refused
// without writing anything or moving head, and after a reopen appends
// continue above the highest seq written.
func TestEnqueueAt(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, Options{})
	id, err := j.StoreID()
	if err != nil || len(id) == 0 {
		t.Fatalf("StoreID = %q, %v", id, err)
	}
	at := func(seq uint64) error {
		r := unlink("a")
		r.Seq = seq
		return j.EnqueueAt(r, nil).Wait()
	}
	if err := at(5); err != nil {
		t.Fatal(err)
	}
	if s := appendT(t, j, unlink("b")); s != 6 {
		t.Fatalf("Enqueue after EnqueueAt(5) got seq %d, want 6", s)
	}
	for _, seq := range []uint64{0, 3, 6} {
		if err := at(seq); !errors.Is(err, ErrInvalid) {
			t.Errorf("EnqueueAt(%d) with head 6 = %v, want ErrInvalid", seq, err)
		}
	}
	if h := j.Head(); h != 6 {
		t.Fatalf("head after refused EnqueueAt = %d, want 6", h)
	}
	if err := at(10); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 4, 7, 9} {
		if _, err := j.Get(seq); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%d) = %v, want ErrNotFound (a hole)", seq, err)
		}
	}
	if r, err := j.Get(5); err != nil || r.Name != "a" {
		t.Fatalf("Get(5) = %+v, %v", r, err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openT(t, dir, Options{})
	if s := appendT(t, j, unlink("c")); s != 11 {
		t.Fatalf("seq after reopen = %d, want 11", s)
	}
	if id2, err := j.StoreID(); err != nil || id2 != id {
		t.Fatalf("StoreID after reopen = %q, %v; want %q", id2, err, id)
	}
}
