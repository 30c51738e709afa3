package journal

import (
	"errors"
	"testing"
)

// TestTruncate: records below the floor go, reset records stay, the floor
// survives a reopen and seqs are not reissued.
func TestTruncate(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, Options{})
	if f, err := j.Floor(); err != nil || f != 1 {
		t.Fatalf("floor of a new store: %d, %v", f, err)
	}
	for i := 0; i < 5; i++ {
		appendT(t, j, unlink("a"))
	}
	reset := appendT(t, j, &Record{Op: OpReset, ResetTo: 2})
	for i := 0; i < 3; i++ {
		appendT(t, j, unlink("b"))
	}
	n, err := j.Truncate(8)
	if err != nil || n != 6 {
		t.Fatalf("truncate below 8: dropped %d, %v; want 6 (seqs 1-7 but the reset)", n, err)
	}
	if _, err := j.Get(3); !errors.Is(err, ErrNotFound) {
		t.Errorf("seq 3 after truncate: %v", err)
	}
	if r, err := j.Get(reset); err != nil || r.Op != OpReset {
		t.Errorf("reset record %d after truncate: %v, %v", reset, r, err)
	}
	var seen []uint64
	_ = j.Iter(1, func(r *Record) error { seen = append(seen, r.Seq); return nil })
	if len(seen) != 3 || seen[0] != reset || seen[1] != 8 {
		t.Errorf("records after truncate: %v", seen)
	}
	if n, err := j.Truncate(5); n != 0 || err != nil {
		t.Errorf("truncate below an older floor: %d, %v", n, err)
	}
	if _, err := j.Truncate(100); err == nil {
		t.Error("truncate past head succeeded")
	}
	head := j.Head()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openT(t, dir, Options{})
	if f, _ := j.Floor(); f != 8 {
		t.Errorf("floor after reopen: %d, want 8", f)
	}
	if s := appendT(t, j, unlink("c")); s != head+1 {
		t.Errorf("seq after truncate and reopen: %d, want %d", s, head+1)
	}
}
