package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// prefillMax is the most pre-written space the segment log keeps past
// its end (cas/prefill.go's prefillAhead).
const prefillMax = 16 << 20

// storeSegments returns the store's segment files, in name order.
func storeSegments(t *testing.T, store string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(store, "db.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".seg") {
			out = append(out, filepath.Join(store, "db.log", e.Name()))
		}
	}
	if len(out) == 0 {
		t.Fatalf("no segment in %s", store)
	}
	return out
}

// zeroTailOf returns how many zero bytes end the file, and its size.
func zeroTailOf(t *testing.T, path string) (zeros, size int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(b) - len(bytes.TrimRight(b, "\x00"))), int64(len(b))
}

// TestPrefillSegments: while mounted, the active segment is pre-written
// with zeros past the log's end (so an fsync's fdatasync flushes data
// only), by at most the prefill; a kill -9 leaves those zeros and the
// next mount takes them for the log's end (every fsync'd write is there,
// fsck is clean); a clean unmount leaves no zero tail in any segment.
func TestPrefillSegments(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	path := filepath.Join(m.Dir, "f")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 0, 200*4096)
	for i := range 200 {
		blk := bytes.Repeat([]byte{byte('a' + i%26)}, 4096)
		if _, err := f.Write(blk); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync %d: %v", i, err)
		}
		want = append(want, blk...)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	segs := storeSegments(t, m.Store)
	zeros, size := zeroTailOf(t, segs[len(segs)-1])
	if zeros == 0 {
		t.Errorf("mounted: the active segment (%d bytes) has no pre-written zeros after its last frame", size)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(segs[len(segs)-1], &st); err != nil {
		t.Fatal(err)
	}
	if used := st.Blocks * 512; used > size-zeros+prefillMax+1<<20 {
		t.Errorf("mounted: the active segment uses %d bytes on disk for %d bytes of log", used, size-zeros)
	}

	m.Kill9()
	rwRemountAfterCrash(t, m)
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after kill -9 and a remount: %d bytes (%v), want the %d fsync'd", len(got), err, len(want))
	}
	m.Unmount()
	for _, s := range storeSegments(t, m.Store) {
		if z, n := zeroTailOf(t, s); z > 64 {
			t.Errorf("unmounted: %s (%d bytes) ends in %d zero bytes", filepath.Base(s), n, z)
		}
	}
}
