package rewind

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

func openJournal(t testing.TB, dir string) *journal.Journal {
	t.Helper()
	j, err := journal.Open(dir, journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestImportCommitReopen(t *testing.T) {
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a.txt"), "hello\n")
	writeFile(t, filepath.Join(src, "sub", "b.txt"), "deep\n")
	if err := os.Symlink("a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(src, "a.txt"), filepath.Join(src, "sub", "hard")); err != nil {
		t.Fatal(err)
	}
	db := t.TempDir()
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
	g, err := CommitImport(j, root, blobs, next, "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openJournal(t, db)
	defer j.Close()
	loaded, err := tree.Load(j.Objects(), g.Root)
	if err != nil {
		t.Fatalf("load after reopen: %v", err)
	}
	rt, err := Reconstruct(j, j.Head())
	if err != nil {
		t.Fatal(err)
	}
	r1, _, _ := loaded.Root()
	r2, _, _ := rt.Root()
	if r1 != g.Root || r2 != g.Root {
		t.Fatalf("roots differ: gen %s loaded %s reconstructed %s", g.Root.Short(), r1.Short(), r2.Short())
	}
	out := t.TempDir()
	if err := Export(rt, nil, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "sub", "hard"))
	if err != nil || string(b) != "hello\n" {
		t.Fatalf("exported hard link: %q %v", b, err)
	}
	var st1, st2 os.FileInfo
	st1, _ = os.Stat(filepath.Join(out, "a.txt"))
	st2, _ = os.Stat(filepath.Join(out, "sub", "hard"))
	if !os.SameFile(st1, st2) {
		t.Errorf("hard link exported as a copy")
	}
	// Importing the export against the tree it came from changes nothing.
	im2 := &Importer{Store: j.Objects(), Base: rt, Alloc: im.Alloc}
	again, err := im2.Import(out)
	if err != nil {
		t.Fatal(err)
	}
	if r3, _, _ := again.Root(); r3 != g.Root {
		t.Errorf("re-import of an export differs: %s vs %s:%s", r3.Short(), g.Root.Short(), describeDiff(again, rt))
	}
}

// describeDiff names the first inodes whose attributes differ, for failure messages.
func describeDiff(a, b *tree.Tree) string {
	out := ""
	for ino := uint64(1); ino < 64; ino++ {
		na, nb := a.Node(ino), b.Node(ino)
		switch {
		case na == nil && nb == nil:
		case na == nil || nb == nil:
			out += fmt.Sprintf(" ino %d only in one tree;", ino)
		case na.Attr != nb.Attr:
			out += fmt.Sprintf(" ino %d: %+v vs %+v;", ino, na.Attr, nb.Attr)
		}
	}
	return out
}
