package journal

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestRepairCleanAndInUse: Repair leaves a sound store as it is (no copy
// directory, nothing cut) and refuses a store another open holds.
func TestRepairCleanAndInUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	j, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendT(t, j, unlink("a"))
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	noReindex := func(*Journal) error { return nil }
	if _, err := Repair(dir, Options{}, noReindex); !errors.Is(err, ErrLocked) {
		t.Fatalf("Repair of an open store: %v, want ErrLocked", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := Repair(dir, Options{}, noReindex)
	if err != nil || len(res.Logs) != 0 || res.Copies != "" {
		t.Fatalf("Repair of a sound store: %+v, %v; want nothing done", res, err)
	}
	if m, _ := filepath.Glob(dir + ".damaged-*"); len(m) != 0 {
		t.Fatalf("Repair of a sound store made %v", m)
	}
}
