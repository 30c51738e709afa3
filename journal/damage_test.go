package journal

import (
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas"
)

func TestManifestRoundTrip(t *testing.T) {
	m := &Manifest{Format: 1, ID: "abc", Durable: 812, Gen: 800}
	got, err := parseManifest(m.encode())
	if err != nil || *got != *m {
		t.Fatalf("parse(encode(%+v)) = %+v, %v", m, got, err)
	}
	for _, bad := range []string{"", "id x\n", "reynfs-store-manifest 1\nid x\ndurable-seq 1\n",
		"reynfs-store-manifest 1\nid x\ndurable-seq 1\ngeneration-seq 2\n", "reynfs-store-manifest 1\nid x\ndurable-seq z\ngeneration-seq 0\n"} {
		if _, err := parseManifest([]byte(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("parse(%q) = %v, want ErrCorrupt", bad, err)
		}
	}
	path := filepath.Join(t.TempDir(), "m")
	if err := writeManifest(path, m); err != nil {
		t.Fatal(err)
	}
	if got, err := readManifest(path); err != nil || *got != *m {
		t.Fatalf("read back %+v, %v", got, err)
	}
	link := path + "-link"
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := readManifest(link); err == nil {
		t.Fatal("readManifest followed a symlink")
	}
}

// writeSome appends n data records (each with a fresh blob) and a
// generation record, syncs and closes; it returns the head seq.
func writeSome(t *testing.T, dir string, n int) uint64 {
	t.Helper()
	j := openT(t, dir, Options{})
	for i := range n {
		data := []byte(strings.Repeat("x", 2000) + string(rune('a'+i%26)) + strings.Repeat("y", i))
		b := cas.Blob{Hash: cas.Sum(data), Data: data}
		if err := j.Enqueue(&Record{Op: OpData, Ino: 2, Size: uint64(len(data)), Chunks: []Chunk{{0, b.Hash}}}, []cas.Blob{b}).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	g := &Record{Op: OpGeneration, GenKind: "manual", Root: cas.Sum([]byte("root"))}
	if err := j.Enqueue(g, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	head := j.Head()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := readManifest(ManifestPath(dir))
	if err != nil || m == nil || m.Durable != head || m.Gen != head {
		t.Fatalf("manifest %+v (%v), want durable and generation seq %d", m, err, head)
	}
	return head
}

func TestOpenRefusesLostHistory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	head := writeSome(t, dir, 10)

	// The manifest claims more than the journal holds.
	m, _ := readManifest(ManifestPath(dir))
	saved := *m
	m.Durable = head + 172
	if err := writeManifest(ManifestPath(dir), m); err != nil {
		t.Fatal(err)
	}
	sums := storeSums(t, dir)
	for _, ro := range []bool{false, true} {
		_, err := Open(dir, Options{ReadOnly: ro})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "lost acknowledged history") {
			t.Fatalf("read-only %v: open with the manifest ahead = %v, want lost history", ro, err)
		}
	}
	if !sameSums(sums, storeSums(t, dir)) {
		t.Fatal("a refused open changed the store's files")
	}
	if err := writeManifest(ManifestPath(dir), &saved); err != nil {
		t.Fatal(err)
	}
	openT(t, dir, Options{}).Close()

	// Badger's files gone, the manifest left: never a new, empty store.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, Options{})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "lost acknowledged history") {
		t.Fatalf("open with the Badger directory gone = %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused open created %s (%v): a new, empty store", dir, err)
	}
}

func TestReadOnlyOpenAfterCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	dir := t.TempDir()
	_, synced := runAndKill(t, dir, 30)
	sums := storeSums(t, dir)
	j, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a crashed store: %v", err)
	}
	for _, s := range synced {
		if _, err := j.Get(s); err != nil {
			t.Fatalf("read-only: synced seq %d: %v", s, err)
		}
	}
	if err := j.Enqueue(&Record{Op: OpUnlink, Parent: 1, Name: "x"}, nil).Wait(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("append on a read-only journal = %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if !sameSums(sums, storeSums(t, dir)) {
		t.Fatal("a read-only open changed the store's files")
	}
	checkAfterCrash(t, dir, synced)
}

func storeSums(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	root := filepath.Dir(dir)
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[p] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSums(a, b map[string][32]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestManifestMarks: a synced generation is in the manifest when Sync
// returns; a durable seq that moved alone follows within the interval.
func TestManifestMarks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	j := openT(t, dir, Options{})
	defer j.Close()
	g := &Record{Op: OpGeneration, GenKind: "manual", Root: cas.Sum([]byte("root"))}
	j.Enqueue(g, nil)
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if m, err := readManifest(ManifestPath(dir)); err != nil || m.Gen != g.Seq || m.Durable < g.Seq {
		t.Fatalf("after a synced generation at seq %d the manifest says %+v (%v)", g.Seq, m, err)
	}
	p := j.Enqueue(&Record{Op: OpUnlink, Parent: 1, Name: "x"}, nil)
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		m, err := readManifest(ManifestPath(dir))
		if err == nil && m.Durable == p.Seq() && m.Gen == g.Seq {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("manifest %+v (%v), want durable seq %d", m, err, p.Seq())
		}
	}
}

// TestDamagedManifest: a manifest that does not parse refuses the store
// (the marks cannot be checked), and fsck's Damaged open reports it.
func TestDamagedManifest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	writeSome(t, dir, 3)
	if err := os.WriteFile(ManifestPath(dir), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "manifest") {
		t.Fatalf("open with a garbage manifest = %v", err)
	}
	j, err := Open(dir, Options{ReadOnly: true, Damaged: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if d := j.Damage(); len(d) != 1 || !strings.Contains(d[0], "manifest") {
		t.Fatalf("Damage() = %q", d)
	}
}
