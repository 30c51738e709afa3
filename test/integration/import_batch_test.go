package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// batchTree writes what the first import's batched reads (io_uring, a slot
// of size+1 bytes per small file) and its metadata warmer must get right:
// files around the page and chunk sizes, empty and all-zero ones, each
// size many times over so that batches mix them, names that sort before
// a sibling directory's subtree ("a-b", "a.b" after "a/..."), and a chain
// of directories deeper than the warmer runs ahead.
func batchTree(t *testing.T, dir string) {
	t.Helper()
	sizes := []int{0, 1, 511, 4095, 4096, 4097, 65535, 65536, 65537}
	for i := range 400 {
		size := sizes[i%len(sizes)]
		data := []byte(strings.Repeat(fmt.Sprintf("%d,", i), size/2+1))[:size]
		if i%7 == 3 {
			data = make([]byte, size) // all zeros: stored as a hole
		}
		writeFile(t, filepath.Join(dir, fmt.Sprintf("s%d", i%4), fmt.Sprintf("f%03d", i)), data, 0o644)
	}
	for _, p := range []string{"a/z/file", "a-b/file", "a.b/file", "a/file", "a0/file"} {
		writeFile(t, filepath.Join(dir, p), []byte(p+"\n"), 0o600)
	}
	deep := dir
	for i := range 90 {
		deep = filepath.Join(deep, fmt.Sprintf("n%d", i))
		writeFile(t, filepath.Join(deep, "leaf"), fmt.Appendf(nil, "level %d\n", i), 0o644)
	}
}

// TestFirstMountBatchedReads: the first mount serves every file of
// batchTree as the directory holds it, and a second mount finds the
// directory unchanged.
func TestFirstMountBatchedReads(t *testing.T) {
	requireFUSE(t)
	dir := filepath.Join(t.TempDir(), "proj")
	batchTree(t, dir)
	want := importPrint(t, dir)
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &Mount{t: t, Dir: abs, Store: filepath.Join(t.TempDir(), "store"), env: testEnv(t)}
	t.Cleanup(m.cleanup)
	for round := range 2 {
		r := m.Run("mount", m.Dir, "--store", m.Store)
		if r.Code != 0 || !isMounted(m.Dir) {
			t.Fatalf("mount %d: exit %d: %s\nlog:\n%s", round, r.Code, r.Stderr, m.LogTail(10))
		}
		m.pid = m.Pid()
		got := importPrint(t, dir)
		for rel, w := range want {
			if g := got[rel]; g != w {
				t.Errorf("mount %d: %s: mounted %q, native %q", round, rel, g, w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("mount %d: %d entries in the mount, %d in the directory", round, len(got), len(want))
		}
		if round == 1 && strings.Contains(m.LogTail(40), "changed while unmounted") {
			t.Errorf("mount %d: the directory was taken for changed:\n%s", round, m.LogTail(40))
		}
		m.Unmount()
	}
}
