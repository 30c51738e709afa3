package rewind

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
)

// badStore fails Get for chosen objects: a damaged chunk.
type badStore struct {
	cas.Store
	mu  sync.Mutex
	bad map[cas.Hash]bool
}

func (s *badStore) Get(h cas.Hash) ([]byte, error) {
	s.mu.Lock()
	b := s.bad[h]
	s.mu.Unlock()
	if b {
		return nil, cas.ErrCorrupt
	}
	return s.Store.Get(h)
}

type treeMaker struct {
	store *badStore
	next  uint64
}

func newTreeMaker() *treeMaker {
	return &treeMaker{store: &badStore{Store: cas.NewMemory(), bad: map[cas.Hash]bool{}}, next: tree.RootIno + 1}
}

// tree imports dir (against base) into a clean tree.
func (m *treeMaker) tree(t *testing.T, dir string, base *tree.Tree) *tree.Tree {
	t.Helper()
	im := &Importer{Store: m.store, Base: base, Alloc: func() (uint64, error) { m.next++; return m.next - 1, nil }}
	tr, err := im.Import(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, blobs, err := tr.Root()
	if err == nil {
		err = StoreBlobs(m.store, blobs)
	}
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// outside is a file beyond the exported directory that a planted symlink
// points at; it must come out of every export unchanged.
func outside(t *testing.T) (string, func()) {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "secret")
	writeFile(t, p, "outside\n")
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, func() {
		t.Helper()
		st, err := os.Lstat(p)
		if err != nil || st.Mode() != 0o600 || readFile(t, p) != "outside\n" {
			t.Errorf("outside file changed: %v %v", st.Mode(), err)
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 {
			t.Errorf("outside directory holds %d entries, want 1", len(ents))
		}
	}
}

func TestExportNeverFollowsPlantedSymlinks(t *testing.T) {
	m := newTreeMaker()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "f"), "one\n")
	writeFile(t, filepath.Join(src, "g"), "same\n")
	writeFile(t, filepath.Join(src, "d", "x"), "x1\n")
	writeFile(t, filepath.Join(src, "gone", "y"), "y\n")
	base := m.tree(t, src, nil)
	out := t.TempDir()
	if err := Export(base, nil, out); err != nil {
		t.Fatal(err)
	}
	// The tree changes: f's content, g's mode only, d's file, gone removed.
	writeFile(t, filepath.Join(src, "f"), "two\n")
	writeFile(t, filepath.Join(src, "d", "x"), "x2\n")
	if err := os.Chmod(filepath.Join(src, "g"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(src, "gone")); err != nil {
		t.Fatal(err)
	}
	next := m.tree(t, src, base)

	secret, check := outside(t)
	secretDir := filepath.Dir(secret)
	// A user plants symlinks where reynfs wrote files and directories.
	for name, target := range map[string]string{"f": secret, "g": secret, "d": secretDir, "gone": secretDir} {
		p := filepath.Join(out, name)
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := ExportAtPath(t, next, base, out); err != nil {
		t.Fatal(err)
	}
	check()
	if got := readFile(t, filepath.Join(out, "f")); got != "two\n" {
		t.Errorf("f = %q", got)
	}
	if st, err := os.Lstat(filepath.Join(out, "d")); err != nil || !st.IsDir() {
		t.Errorf("d is not a directory: %v %v", st, err)
	}
	if got := readFile(t, filepath.Join(out, "d", "x")); got != "x2\n" {
		t.Errorf("d/x = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(out, "gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gone still there: %v", err)
	}
	// g: its content did not change, so only attributes were to be set;
	// the planted link's type differs, so it is replaced, never chmodded
	// through.
	if st, err := os.Lstat(filepath.Join(out, "g")); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o755 {
		t.Errorf("g: %v %v", st.Mode(), err)
	}
}

// ExportAtPath exports through a descriptor, as the daemon does.
func ExportAtPath(t *testing.T, tr, base *tree.Tree, dir string) error {
	t.Helper()
	top, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	return ExportAt(tr, top, ExportOptions{Base: base})
}

func TestExportTempNames(t *testing.T) {
	m := newTreeMaker()
	src := t.TempDir()
	long := strings.Repeat("n", 255)
	writeFile(t, filepath.Join(src, "x"), "x1\n")
	writeFile(t, filepath.Join(src, "x.reynfs-tmp"), "mine\n")
	writeFile(t, filepath.Join(src, "y.reynfs-tmp", "inner"), "dir named like a temp\n")
	writeFile(t, filepath.Join(src, "y"), "y1\n")
	writeFile(t, filepath.Join(src, long), "long1\n")
	base := m.tree(t, src, nil)
	out := t.TempDir()
	if err := Export(base, nil, out); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"x", "y", long} {
		writeFile(t, filepath.Join(src, n), n[:1]+"2\n")
	}
	next := m.tree(t, src, base)
	if err := ExportAtPath(t, next, base, out); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"x": "x2\n", "y": "y2\n", long: "n2\n", "x.reynfs-tmp": "mine\n", "y.reynfs-tmp/inner": "dir named like a temp\n"} {
		if got := readFile(t, filepath.Join(out, name)); got != want {
			t.Errorf("%.20s = %q, want %q", name, got, want)
		}
	}
	ents, _ := os.ReadDir(out)
	if len(ents) != 5 {
		t.Errorf("export left %d entries, want 5 (a temp file behind?)", len(ents))
	}
}

func TestExportFailureDoesNotStopTheRest(t *testing.T) {
	m := newTreeMaker()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a"), "a\n")
	writeFile(t, filepath.Join(src, "bad"), "damaged chunk\n")
	writeFile(t, filepath.Join(src, "z", "c"), "c\n")
	tr := m.tree(t, src, nil)
	n, err := lookupPath(tr, "bad")
	if err != nil {
		t.Fatal(err)
	}
	m.store.bad[n.ChunkHashes()[0]] = true
	out := t.TempDir()
	err = Export(tr, nil, out)
	var ee *ExportError
	if !errors.As(err, &ee) || len(ee.Failures) != 1 || ee.Failures[0].Path != "bad" {
		t.Fatalf("export error = %v, want one failure on bad", err)
	}
	if !strings.Contains(err.Error(), "\nbad: ") {
		t.Errorf("error does not name the path on a line of its own: %q", err)
	}
	if readFile(t, filepath.Join(out, "a")) != "a\n" || readFile(t, filepath.Join(out, "z", "c")) != "c\n" {
		t.Errorf("the other files were not written")
	}
	if _, err := os.Lstat(filepath.Join(out, "bad")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bad: %v, want nothing written", err)
	}
	ents, _ := os.ReadDir(out)
	if len(ents) != 2 {
		t.Errorf("export left %d entries, want 2 (a temp file behind?)", len(ents))
	}
}

func TestExportKeepsChangesUnderneath(t *testing.T) {
	m := newTreeMaker()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "k"), "k1\n")
	writeFile(t, filepath.Join(src, "w"), "w1\n")
	writeFile(t, filepath.Join(src, "old", "o"), "o\n")
	base := m.tree(t, src, nil)
	out := t.TempDir()
	if err := Export(base, nil, out); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "k"), "k-mount\n")
	writeFile(t, filepath.Join(src, "w"), "w-mount\n")
	if err := os.RemoveAll(filepath.Join(src, "old")); err != nil {
		t.Fatal(err)
	}
	next := m.tree(t, src, base)
	// Underneath the mount: k rewritten, old/new added.
	writeFile(t, filepath.Join(out, "k"), "k-under\n")
	writeFile(t, filepath.Join(out, "old", "new"), "under\n")
	top, err := OpenDir(out)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	if err := ExportAt(next, top, ExportOptions{Base: base, Keep: PathSet{"k": true, "old/new": true}}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(out, "k")); got != "k-under\n" {
		t.Errorf("k = %q, the change underneath was overwritten", got)
	}
	if got := readFile(t, filepath.Join(out, "old", "new")); got != "under\n" {
		t.Errorf("old/new = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(out, "old", "o")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old/o: %v, want removed", err)
	}
	if got := readFile(t, filepath.Join(out, "w")); got != "w-mount\n" {
		t.Errorf("w = %q", got)
	}
}

func TestImportPinKeepsBase(t *testing.T) {
	m := newTreeMaker()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "p"), "base\n")
	writeFile(t, filepath.Join(src, "q"), "q\n")
	base := m.tree(t, src, nil)
	// The write-back failed on p (the directory still holds another
	// version) and on q (never created): pinned, they are not changes.
	writeFile(t, filepath.Join(src, "p"), "stale version on disk\n")
	if err := os.Remove(filepath.Join(src, "q")); err != nil {
		t.Fatal(err)
	}
	im := &Importer{Store: m.store, Base: base, Pin: PathSet{"p": true, "q": true}, Alloc: func() (uint64, error) { m.next++; return m.next - 1, nil }}
	tr, err := im.Import(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tr.Root(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"p", "q"} {
		a, err := lookupPath(tr, name)
		b, _ := lookupPath(base, name)
		if err != nil || !same(a, b) {
			t.Errorf("pinned %s imported as %+v, want base's %+v (%v)", name, a, b, err)
		}
	}
}

func TestImportReadsNoSymlinkTarget(t *testing.T) {
	m := newTreeMaker()
	secret, check := outside(t)
	src := t.TempDir()
	if err := os.Symlink(secret, filepath.Join(src, "s")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(secret), filepath.Join(src, "sd")); err != nil {
		t.Fatal(err)
	}
	tr := m.tree(t, src, nil)
	for _, name := range []string{"s", "sd"} {
		n, err := lookupPath(tr, name)
		if err != nil || !n.IsLink() {
			t.Fatalf("%s imported as %v %v, want a symlink", name, n, err)
		}
	}
	if top, err := OpenDir(filepath.Join(src, "s")); err == nil {
		top.Close()
		t.Errorf("OpenDir followed a symlink")
	}
	check()
}

func TestUnderneath(t *testing.T) {
	m := newTreeMaker()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a"), "a1\n")
	writeFile(t, filepath.Join(src, "b"), "b1\n")
	base := m.tree(t, src, nil)
	out := t.TempDir()
	if err := Export(base, nil, out); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "a"), "a2\n")
	writeFile(t, filepath.Join(src, "d", "new"), "n\n")
	next := m.tree(t, src, base)
	top, err := OpenDir(out)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	k, err := Underneath(m.store, top, base, next, nil)
	if err != nil || len(k.List) != 0 {
		t.Fatalf("nothing changed underneath, got %v %v", k.List, err)
	}
	// A write-back that ran (a crash before its bookkeeping) put next's
	// state there: the redo must not take it for someone's change. Then a
	// user writes b and adds c underneath.
	if err := ExportAt(next, top, ExportOptions{Base: base}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(out, "d"), 0o700); err != nil { // its attributes not yet set
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(out, "b"), "b-under\n")
	writeFile(t, filepath.Join(out, "c"), "c\n")
	k, err = Underneath(m.store, top, base, next, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(k.List, " ") != "b c" || !k.Paths["b"] || !k.Paths["c"] || len(k.Attrs) != 0 {
		t.Errorf("kept %v (attributes of %v), want b and c", k.List, k.Attrs)
	}
}
