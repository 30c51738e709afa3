package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func blocksOf(t *testing.T, path string) (size, disk int64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Size, st.Blocks * 512
}

// A closed store keeps only DISCARD's non-zero pages on disk, with the
// same content; opened again it is allocated whole before any commit, and
// the store reads back what it held.
func TestClosedStoreDigsDiscard(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, discardName)
	j, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	seq := appendT(t, j, &Record{Op: OpUnlink, Time: 1, Parent: 1, Name: "d"})
	if _, disk := blocksOf(t, path); disk < 1<<20 {
		t.Fatalf("DISCARD of an open store has %d bytes of blocks, want all 1 MiB", disk)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	size, disk := blocksOf(t, path)
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if size != 1<<20 || !bytes.Equal(before, after) {
		t.Fatalf("closing changed DISCARD (size %d)", size)
	}
	if disk > 64<<10 {
		t.Fatalf("DISCARD of a closed store has %d bytes of blocks, want its few non-zero pages", disk)
	}
	j = openT(t, dir, Options{})
	if _, disk := blocksOf(t, path); disk < 1<<20 {
		t.Fatalf("DISCARD of a reopened store has %d bytes of blocks, want all 1 MiB", disk)
	}
	r, err := j.Get(seq)
	if err != nil || r.Name != "d" {
		t.Fatalf("after reopening: record %d = %+v, %v", seq, r, err)
	}
}

// digHoles never changes a file's bytes, and keeps allocated the pages up
// to the one after the last non-zero byte (where Badger, still open,
// appends): holes only in the zero pages after them.
func TestDigHolesKeepsContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := make([]byte, 16*digPage+100)
	data[digPage+7] = 1
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := digHoles(path); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("content changed: %v", err)
	}
	if _, disk := blocksOf(t, path); disk < 3*digPage || disk > 4*digPage {
		t.Errorf("%d bytes of blocks left, want the 3 pages up to the one after the last non-zero byte", disk)
	}
}
