package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// TestFsyncKeepsSegmentSize: once the prefill is ahead, fsync'd 4 KiB
// appends land in its zeros and the active segment's size stays put, so
// each fsync's fdatasync has no file size to commit (a round that topped
// up the few KiB each frame took grew the file at every fsync: a second
// device flush per fsync).
func TestFsyncKeepsSegmentSize(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	f, err := os.OpenFile(filepath.Join(m.Dir, "f"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blk := bytes.Repeat([]byte{'x'}, 4096)
	write := func(i int) {
		t.Helper()
		blk[0] = byte(i)
		if _, err := f.Write(blk); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync %d: %v", i, err)
		}
	}
	size := func() int64 {
		t.Helper()
		segs := storeSegments(t, m.Store)
		var st syscall.Stat_t
		if err := syscall.Stat(segs[len(segs)-1], &st); err != nil {
			t.Fatal(err)
		}
		return st.Size
	}
	write(0) // the first sync starts the prefill
	deadline := time.Now().Add(30 * time.Second)
	for size() < prefillMax {
		if time.Now().After(deadline) {
			t.Fatalf("the prefill did not reach %d bytes in 30 s (%d)", prefillMax, size())
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := size()
	const n = 100
	for i := 1; i <= n; i++ {
		write(i)
	}
	if after := size(); after != before {
		t.Errorf("%d fsync'd 4 KiB appends grew the active segment from %d to %d bytes; want them in the pre-written space", n, before, after)
	}
}
