package journal

import (
	"errors"
	"testing"
)

// TestTruncateKeep: the seqs keep names survive a truncation, a raised
// floor refuses states before any record goes, and the next Truncate drops
// what the raise left (as after a crash between the two).
func TestTruncateKeep(t *testing.T) {
	j := openT(t, t.TempDir(), Options{})
	for i := 0; i < 9; i++ {
		appendT(t, j, unlink("a"))
	}
	if err := j.RaiseFloor(6); err != nil {
		t.Fatal(err)
	}
	if f, _ := j.Floor(); f != 6 {
		t.Fatalf("floor after raise: %d", f)
	}
	if _, err := j.Get(2); err != nil {
		t.Fatalf("raise dropped seq 2: %v", err)
	}
	if err := j.RaiseFloor(3); err != nil {
		t.Fatal(err)
	}
	if f, _ := j.Floor(); f != 6 {
		t.Fatalf("a lower raise moved the floor to %d", f)
	}
	n, err := j.Truncate(6, 2, 4)
	if err != nil || n != 3 {
		t.Fatalf("truncate below 6 keeping 2 and 4: dropped %d, %v; want 3", n, err)
	}
	for _, s := range []uint64{2, 4, 6, 9} {
		if _, err := j.Get(s); err != nil {
			t.Errorf("seq %d after truncate: %v", s, err)
		}
	}
	for _, s := range []uint64{1, 3, 5} {
		if _, err := j.Get(s); !errors.Is(err, ErrNotFound) {
			t.Errorf("seq %d after truncate: %v", s, err)
		}
	}
	// Keep 4 no longer: it goes at the next call, below the same floor.
	if n, err := j.Truncate(6, 2); err != nil || n != 1 {
		t.Fatalf("truncate dropping the kept 4: %d, %v", n, err)
	}
	if err := j.RaiseFloor(100); err == nil {
		t.Error("raise past head succeeded")
	}
}
