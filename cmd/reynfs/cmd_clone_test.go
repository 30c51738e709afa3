package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// importInto imports the tree at src into the store db as a new state
// (an import record and its generation), as mount does for a directory
// changed while unmounted.
func importInto(t *testing.T, db, src, label string) {
	t.Helper()
	j, err := journal.Open(db, journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	next := uint64(1000)*j.Head() + 2
	im := &rewind.Importer{Store: j.Objects(), Alloc: func() (uint64, error) { next++; return next - 1, nil }}
	tr, err := im.Import(src)
	if err != nil {
		t.Fatal(err)
	}
	root, blobs, err := tr.Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rewind.CommitImport(j, root, blobs, next, label); err != nil {
		t.Fatal(err)
	}
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, d := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func diffR(t *testing.T, a, b string) {
	t.Helper()
	diff, err := exec.LookPath("diff")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("diff(1) is missing")
		}
		t.Skip("diff(1) is missing")
	}
	if out, err := exec.Command(diff, "-r", "--no-dereference", a, b).CombinedOutput(); err != nil {
		t.Errorf("diff -r %s %s: %v\n%s", a, b, err, out)
	}
}

// TestRemotePushClone drives the commands as a user does: remote add,
// push, clone --at the first of two states; the clone fscks clean, and
// `reynfs export` of the target in both workspaces, and the clone's own
// directory, are the same trees (diff -r). Bad input exits 2 with one line.
func TestRemotePushClone(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	proj := filepath.Join(t.TempDir(), "proj")
	writeTree(t, proj, map[string]string{"a.txt": "one\n", "sub/b.txt": strings.Repeat("b", 100000)})
	store, err := daemon.DefaultStore(proj)
	if err != nil {
		t.Fatal(err)
	}
	db := daemon.DBPath(store)
	if err := os.MkdirAll(store, 0o700); err != nil {
		t.Fatal(err)
	}
	importInto(t, db, proj, "first")
	writeTree(t, proj, map[string]string{"a.txt": "two\n", "c.txt": "new\n"})
	importInto(t, db, proj, "second")

	remote := t.TempDir()
	url := "file://" + remote
	for _, args := range [][]string{
		{"remote", "add", "origin", url, "--dir", proj},
		{"remote", "list", "--dir", proj, "--json"},
		{"push", "--dir", proj},
		{"push", "--dir", proj, "--json"}, // up to date
	} {
		if code := run(args); code != 0 {
			t.Fatalf("reynfs %s: exit %d", strings.Join(args, " "), code)
		}
	}
	clone := filepath.Join(t.TempDir(), "copy")
	if code := run([]string{"clone", url + "#proj", clone, "--at", "first"}); code != 0 {
		t.Fatalf("clone: exit %d", code)
	}
	if code := run([]string{"fsck", clone}); code != 0 {
		t.Fatalf("fsck of the clone: exit %d", code)
	}
	e1, e2 := filepath.Join(t.TempDir(), "e1"), filepath.Join(t.TempDir(), "e2")
	if code := run([]string{"export", "first", e1, "--dir", proj}); code != 0 {
		t.Fatalf("export of the source: exit %d", code)
	}
	if code := run([]string{"export", "first", e2, "--dir", clone}); code != 0 {
		t.Fatalf("export of the clone: exit %d", code)
	}
	diffR(t, e1, e2)
	diffR(t, e1, clone)
	if b, err := os.ReadFile(filepath.Join(clone, "a.txt")); err != nil || string(b) != "one\n" {
		t.Fatalf("the clone's a.txt: %q, %v; want the first state's", b, err)
	}

	checkAdopted(t, clone)
	overlap := filepath.Join(t.TempDir(), "y")
	if code := run([]string{"push", "--ws", "proj", "--dir", clone}); code != exitFailure {
		t.Errorf("push of the clone over the workspace it came from: exit %d, want %d", code, exitFailure)
	}
	if code := run([]string{"push", "origin", "--dir", clone}); code != 0 { // as "copy"
		t.Errorf("push of the clone as a new workspace: exit %d", code)
	}

	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"clone", "ftp://x#w", filepath.Join(t.TempDir(), "x")}, exitUsage},
		{[]string{"clone", url + "#bad/name", filepath.Join(t.TempDir(), "x")}, exitUsage},
		{[]string{"clone", url + "#proj", clone}, exitUsage}, // not empty
		{[]string{"clone", url + "#proj", overlap, "--store", filepath.Join(overlap, "s")}, exitUsage},
		{[]string{"clone", url + "#nope", filepath.Join(t.TempDir(), "x")}, exitFailure},
		{[]string{"remote", "add", "origin", url, "--dir", proj}, exitUsage}, // exists
		{[]string{"remote", "add", "b/c", url, "--dir", proj}, exitUsage},
		{[]string{"remote", "remove", "nope", "--dir", proj}, exitUsage},
		{[]string{"push", "nope", "--dir", proj}, exitUsage},
	} {
		if code := run(c.args); code != c.code {
			t.Errorf("reynfs %s: exit %d, want %d", strings.Join(c.args, " "), code, c.code)
		}
	}
	if code := run([]string{"remote", "remove", "origin", "--dir", proj}); code != 0 {
		t.Fatalf("remote remove: exit %d", code)
	}
	if code := run([]string{"push", "--dir", proj}); code != exitUsage {
		t.Errorf("push with no remote named: exit %d, want %d", code, exitUsage)
	}
}

// checkAdopted: the clone's store records that its directory holds the
// live tree, so a mount finds nothing changed while unmounted: the
// import a mount runs (with the recorded tree as its base) gives the
// recorded root.
func checkAdopted(t *testing.T, dir string) {
	t.Helper()
	store, err := daemon.DefaultStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(daemon.DBPath(store), journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	b, err := j.GetMeta("dirbase")
	if err != nil {
		t.Fatal(err)
	}
	h, err := cas.Parse(string(b))
	if err != nil {
		t.Fatalf("dirbase %q: %v", b, err)
	}
	if live := liveRoot(t, j); live != h {
		t.Fatalf("dirbase %s, live root %s", h.Short(), live.Short())
	}
	base, err := tree.Load(j.Objects(), h)
	if err != nil {
		t.Fatal(err)
	}
	next := uint64(1 << 30)
	im := &rewind.Importer{Store: j.Objects(), Base: base, Alloc: func() (uint64, error) { next++; return next - 1, nil }}
	nt, err := im.Import(dir)
	if err != nil {
		t.Fatal(err)
	}
	if root, _, err := nt.Root(); err != nil || root != h {
		t.Fatalf("a mount's import of %s gives %s, %v; want dirbase %s", dir, root.Short(), err, h.Short())
	}
}

func liveRoot(t *testing.T, j *journal.Journal) cas.Hash {
	t.Helper()
	tr, err := rewind.Reconstruct(j, j.Head())
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := tr.Root()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
