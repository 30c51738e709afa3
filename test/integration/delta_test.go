package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// deltaContent is what file i holds after step s (0: as imported).
func deltaContent(i, s int) []byte {
	return fmt.Appendf(nil, "file %d, step %d\n", i, s)
}

// checkDeltaFiles reads every file of d/ and compares it with step s of
// the steps the files took (file i is at step min(s, i) for i >= 1).
func checkDeltaFiles(t *testing.T, m *Mount, n, s int) {
	t.Helper()
	for i := range n {
		want := deltaContent(i, 0)
		if i >= 1 && i <= s {
			want = deltaContent(i, i)
		}
		got, err := os.ReadFile(filepath.Join(m.Dir, "d", fmt.Sprintf("f%03d", i)))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("d/f%03d at step %d: %q, %v; want %q", i, s, got, err, want)
		}
	}
}

// TestDeltaDirectories: a directory of 150 entries changed at each of six
// checkpoints is stored as deltas against its previous version (store
// format 3). Through a remount (nothing cached), a rewind to an older
// generation reads the older versions back; gc keeping only the newest
// generation leaves the bases the newest directory's delta needs (the
// sweep's closure: without it the directory is EIO after the next
// mount); fsck checks the store by re-hashing (cleanup runs it too).
func TestDeltaDirectories(t *testing.T) {
	const n = 150
	dir := t.TempDir()
	for i := range n {
		writeFile(t, filepath.Join(dir, "d", fmt.Sprintf("f%03d", i)), deltaContent(i, 0), 0o644)
	}
	m := mountProject(t, dir)
	for s := 1; s <= 6; s++ {
		writeFile(t, filepath.Join(m.Dir, "d", fmt.Sprintf("f%03d", s)), deltaContent(s, s), 0o644)
		retainRun(t, m, "checkpoint", "-m", fmt.Sprintf("step-%d", s))
	}
	m.Unmount()
	m.Mount()
	checkDeltaFiles(t, m, n, 6)
	retainRun(t, m, "rewind", "step-3")
	checkDeltaFiles(t, m, n, 3)
	retainRun(t, m, "rewind", "step-6")
	checkDeltaFiles(t, m, n, 6)
	retainRun(t, m, "gc", "--keep", "1")
	m.Unmount()
	if r := m.Run("fsck", "--store", m.Store); r.Code != 0 {
		t.Fatalf("fsck after gc: exit %d: %s%s", r.Code, r.Stderr, r.Stdout)
	}
	m.Mount()
	checkDeltaFiles(t, m, n, 6)
}
