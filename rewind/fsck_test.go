package rewind

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// fsckStore imports a small tree into a new store and closes it.
func fsckStore(t *testing.T) (db string, files map[string]string) {
	t.Helper()
	src := t.TempDir()
	files = map[string]string{
		"a.txt":        "hello\n",
		"sub/b.txt":    strings.Repeat("deep ", 20000), // two chunks
		"sub/deep/c.x": "c\n",
	}
	for p, d := range files {
		writeFile(t, filepath.Join(src, p), d)
	}
	db = filepath.Join(t.TempDir(), "db")
	j := openJournal(t, db)
	next := uint64(2)
	im := &Importer{Store: j.Objects(), Alloc: func() (uint64, error) { next++; return next - 1, nil }}
	tr, err := im.Import(src)
	if err != nil {
		t.Fatal(err)
	}
	root, blobs, err := tr.Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CommitImport(j, root, blobs, next, "test"); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return db, files
}

func fsckRO(t *testing.T, db string) (*FsckReport, *journal.Journal) {
	t.Helper()
	j, err := journal.Open(db, journal.Options{ReadOnly: true, Damaged: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	r, err := Fsck(j)
	if err != nil {
		t.Fatal(err)
	}
	return r, j
}

func TestFsckClean(t *testing.T) {
	db, _ := fsckStore(t)
	r, _ := fsckRO(t, db)
	if r.Damaged() || len(r.Generations) != 1 || r.Objects == 0 {
		t.Fatalf("clean store: %+v", r)
	}
}

// TestFsckNamesDamage replaces the second chunk of sub/b.txt with bytes
// that do not hash to its name: fsck names the object, the path in the
// generation and in head, and salvage writes every other file whole and
// b.txt with a hole.
func TestFsckNamesDamage(t *testing.T) {
	db, files := fsckStore(t)
	data := []byte(files["sub/b.txt"])
	h := cas.Sum(data[cas.ChunkSize:])
	j := openJournal(t, db)
	err := j.DB().Update(func(txn *badger.Txn) error { return txn.Set(cas.Key(h), []byte("not the chunk")) })
	if cerr := j.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	r, j := fsckRO(t, db)
	if !r.Damaged() || len(r.BadObjects) != 1 || r.BadObjects[0].Hash != h.String() {
		t.Fatalf("bad objects %+v, want %s", r.BadObjects, h)
	}
	for _, g := range append(r.Generations, r.Head) {
		if len(g.Damaged) != 1 || g.Damaged[0].Path != "/sub/b.txt" || !strings.Contains(g.Damaged[0].Problem, h.Short()) {
			t.Fatalf("seq %d: damaged %+v, want /sub/b.txt naming %s", g.Seq, g.Damaged, h.Short())
		}
	}

	out := filepath.Join(t.TempDir(), "salvage")
	res, err := Salvage(j, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Skipped) != 1 || res.Skipped[0].Path != "/sub/b.txt" {
		t.Fatalf("skipped %+v", res.Skipped)
	}
	for p, d := range files {
		got, err := os.ReadFile(filepath.Join(out, p))
		if err != nil {
			t.Fatal(err)
		}
		want := []byte(d)
		if p == "sub/b.txt" {
			want = append(append([]byte(nil), want[:cas.ChunkSize]...), make([]byte, len(want)-cas.ChunkSize)...)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("salvaged %s differs", p)
		}
	}
}

// TestFsckEmptyStore: a store whose first import never committed anything
// is not damaged.
func TestFsckEmptyStore(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db")
	j := openJournal(t, db)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	r, _ := fsckRO(t, db)
	if r.Damaged() {
		t.Fatalf("empty store: %+v", r)
	}
}

// TestFsckNamesUnindexed: the index loses a chunk a generation needs (as a
// collector sweeping too much would) while its bytes stay in a segment.
// fsck reads the whole log to salvage from it, and still names the path:
// a mount could not read it.
func TestFsckNamesUnindexed(t *testing.T) {
	db, files := fsckStore(t)
	h := cas.Sum([]byte(files["sub/b.txt"])[cas.ChunkSize:])
	j := openJournal(t, db)
	if err := j.Objects().Delete([]cas.Hash{h}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	r, _ := fsckRO(t, db)
	if !r.Damaged() || len(r.Generations) != 1 {
		t.Fatalf("fsck of a store whose index lost a needed chunk: %+v", r)
	}
	for _, c := range []GenCheck{r.Generations[0], r.Head} {
		if len(c.Damaged) != 1 || c.Damaged[0].Path != "/sub/b.txt" || !strings.Contains(c.Damaged[0].Problem, "not in the index") {
			t.Errorf("seq %d: damage %+v, want /sub/b.txt not in the index", c.Seq, c.Damaged)
		}
	}
}
