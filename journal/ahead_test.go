package journal

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reynfs/reynfs/cas"
)

// copyTree copies the regular files of src into dst (made), as they are
// now: for Badger's mapped WAL, what the kernel would write back.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err == nil {
			_, err = io.Copy(out, in)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		in.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

func copyFileT(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestIndexAheadOfLog: a power cut after commits that no sync covered,
// where the kernel had written Badger's WAL back (the index knows the
// commits: their records, "m/seq", a meta key they overwrote, their
// objects, "m/logpos") but not the log's frames. The store is built from
// the log, the manifest and the segment files as of the last sync and
// Badger's files as of after the commits. Open brings the index back to
// the log (the frames' absence and the marks prove no sync covered them):
// the synced history and the meta key's synced value are there, nothing
// of the lost commits is, and the store takes writes and reopens.
func TestIndexAheadOfLog(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "db")
	cut := filepath.Join(base, "cut", "db")
	j := openT(t, dir, Options{})
	put := func(i int) {
		data := []byte(strings.Repeat("z", 3000) + string(rune('a'+i%26)) + strings.Repeat("w", i))
		b := cas.Blob{Hash: cas.Sum(data), Data: data}
		if err := j.Enqueue(&Record{Op: OpData, Ino: 2, Size: uint64(len(data)), Chunks: []Chunk{{0, b.Hash}}}, []cas.Blob{b}).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		put(i)
	}
	if err := j.SetMeta("k", []byte("synced")); err != nil { // syncs
		t.Fatal(err)
	}
	synced := j.Head()
	// The log and the manifest as the power cut keeps them.
	if err := os.MkdirAll(filepath.Dir(cut), 0o700); err != nil {
		t.Fatal(err)
	}
	copyTree(t, LogPath(dir), LogPath(cut))
	copyFileT(t, ManifestPath(dir), ManifestPath(cut))
	// Commits no sync covers, one of them overwriting the meta key.
	var lost []cas.Hash
	for i := 5; i < 9; i++ {
		put(i)
		lost = append(lost, cas.Sum([]byte(strings.Repeat("z", 3000)+string(rune('a'+i%26))+strings.Repeat("w", i))))
	}
	k, _ := metaKey("k")
	j.mu.Lock()
	b := j.addLocked(item{key: k, val: []byte("never synced")}, true)
	j.mu.Unlock()
	if err := (&Pending{b: b}).Wait(); err != nil {
		t.Fatal(err)
	}
	put(9)
	if j.Head() <= synced {
		t.Fatal("no commits after the sync")
	}
	copyTree(t, dir, cut) // Badger's files, WAL included, as written back
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// A read-only open catches down in memory, writing nothing.
	sums := storeSums(t, cut)
	ro, err := Open(cut, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open after a power cut with the index ahead of the log: %v", err)
	}
	if h := ro.Head(); h != synced {
		t.Errorf("read-only: head %d, want the synced %d", h, synced)
	}
	if v, err := ro.GetMeta("k"); err != nil || string(v) != "synced" {
		t.Errorf("read-only: meta k = %q (%v), want its synced value", v, err)
	}
	if r, err := ro.Get(synced + 1); err == nil || r != nil {
		t.Errorf("read-only: record %d, never synced: %v", synced+1, r)
	}
	if ok, err := ro.Objects().Has(lost[0]); err != nil || ok {
		t.Errorf("read-only: object of a lost commit: %v (%v)", ok, err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if !sameSums(sums, storeSums(t, cut)) {
		t.Fatal("the read-only open changed the store's files")
	}

	j2, err := Open(cut, Options{})
	if err != nil {
		t.Fatalf("open after a power cut with the index ahead of the log: %v", err)
	}
	if h := j2.Head(); h != synced {
		t.Errorf("head %d after the catch-down, want the synced %d", h, synced)
	}
	if v, err := j2.GetMeta("k"); err != nil || string(v) != "synced" {
		t.Errorf("meta k = %q (%v), want its synced value", v, err)
	}
	for s := synced + 1; s <= synced+6; s++ {
		if r, err := j2.Get(s); err == nil || r != nil {
			t.Errorf("record %d, never synced, is in the index: %v", s, r)
		}
	}
	for _, h := range lost {
		if ok, err := j2.Objects().Has(h); err != nil || ok {
			t.Errorf("object %s of a lost commit: in the index %v (%v)", h.Short(), ok, err)
		}
	}
	r := &Record{Op: OpData, Ino: 2, Size: 1, Chunks: []Chunk{{0, cas.Sum([]byte("x"))}}}
	if err := j2.Enqueue(r, []cas.Blob{{Hash: cas.Sum([]byte("x")), Data: []byte("x")}}).Wait(); err != nil {
		t.Fatal(err)
	}
	if r.Seq != synced+1 {
		t.Errorf("next seq %d, want %d", r.Seq, synced+1)
	}
	if err := j2.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := j2.Close(); err != nil {
		t.Fatal(err)
	}
	j3, err := Open(cut, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer j3.Close()
	if got, err := j3.Get(synced + 1); err != nil || got.Size != 1 {
		t.Fatalf("record written after the catch-down: %v %v", got, err)
	}
}

// TestIndexAheadSyncedLost: the same, but a sync (with a generation, so
// the manifest's marks are written before it returns) covered the
// commits the log then lacks (a disk that lost synced writes): the
// catch-down would drop acknowledged records, so the open refuses the
// store as lost history, before writing a byte of it.
func TestIndexAheadSyncedLost(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "db")
	cut := filepath.Join(base, "cut", "db")
	j := openT(t, dir, Options{})
	put := func(i int) {
		data := []byte(strings.Repeat("q", 3000) + strings.Repeat("w", i))
		b := cas.Blob{Hash: cas.Sum(data), Data: data}
		if err := j.Enqueue(&Record{Op: OpData, Ino: 2, Size: uint64(len(data)), Chunks: []Chunk{{0, b.Hash}}}, []cas.Blob{b}).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		put(i)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(cut), 0o700); err != nil {
		t.Fatal(err)
	}
	copyTree(t, LogPath(dir), LogPath(cut))
	for i := 5; i < 9; i++ {
		put(i)
	}
	g := &Record{Op: OpGeneration, GenKind: "manual", Root: cas.Sum([]byte("root"))}
	if err := j.Enqueue(g, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	copyTree(t, dir, cut)
	copyFileT(t, ManifestPath(dir), ManifestPath(cut))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	sums := storeSums(t, cut)
	_, err := Open(cut, Options{})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "lost acknowledged history") && !strings.Contains(err.Error(), "durable") {
		t.Fatalf("open of a store whose log lost synced commits: %v, want ErrCorrupt naming the durable seq", err)
	}
	if !sameSums(sums, storeSums(t, cut)) {
		t.Fatal("the refused open changed the store's files")
	}
}
