package rewind

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/reynfs/reynfs/fs/tree"
)

// TestRestore brings a deleted directory, an overwritten file and a file
// renamed since back from past states; the rest of the tree is untouched,
// the copies get new inode numbers, and a replay of the journal agrees.
func TestRestore(t *testing.T) {
	w := &workspace{dir: t.TempDir()}
	w.open(t)
	defer func() { _ = w.j.Close() }()
	c := modelCaller
	mk := func(parent uint64, name string) uint64 {
		st, err := w.live.Mkdir(c, parent, name, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	put := func(parent uint64, name, data string) uint64 {
		st, err := w.live.Lookup(parent, name)
		if err != nil {
			if st, err = w.live.Create(c, parent, name, syscall.S_IFREG|0o644, 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.live.SetAttr(c, st.Ino, tree.SetAttrIn{Valid: tree.SetSize}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.live.WriteAt(c, st.Ino, tree.NoHandle, []byte(data), 0, false); err != nil {
			t.Fatal(err)
		}
		if err := w.live.Flush(c, st.Ino); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	src := mk(tree.RootIno, "src")
	put(src, "a.go", "package a // v1")
	sub := mk(src, "sub")
	b := put(sub, "b.go", "package sub")
	if _, err := w.live.Link(c, b, src, "b-link.go"); err != nil {
		t.Fatal(err)
	}
	put(tree.RootIno, "notes", "v1")
	v1 := w.j.Head()

	put(tree.RootIno, "notes", "v2")
	if err := w.live.Rename(c, src, "a.go", tree.RootIno, "moved.go", 0); err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct {
		dir  uint64
		name string
	}{{sub, "b.go"}, {src, "b-link.go"}} {
		if err := w.live.Unlink(c, op.dir, op.name); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.live.Rmdir(c, src, "sub"); err != nil {
		t.Fatal(err)
	}
	if err := w.live.Rmdir(c, tree.RootIno, "src"); err != nil {
		t.Fatal(err)
	}
	before := snapshotOf(t, w)

	res, err := w.rw.Restore("src", v1, ".reynfs")
	if err != nil {
		t.Fatal(err)
	}
	if res.Inodes != 4 || res.Replaced {
		t.Errorf("restore src: %+v, want 4 inodes (src, a.go, sub, b.go) and nothing replaced", res)
	}
	if _, err := w.rw.Restore("/notes", v1, ".reynfs"); err != nil {
		t.Fatal(err)
	}
	want := state{}
	for p, v := range before {
		want[p] = v
	}
	want["src"], want["src/a.go"], want["src/sub"] = "d", "f:package a // v1", "d"
	want["src/sub/b.go"], want["src/b-link.go"], want["notes"] = "f:package sub", "f:package sub", "f:v1"
	got := snapshotOf(t, w)
	if d := diffStates(want, got); d != "" {
		t.Fatalf("after restore: %s", d)
	}
	// moved.go (the old src/a.go) lives on: the restored a.go is a new inode.
	moved, _ := w.live.Lookup(tree.RootIno, "moved.go")
	w.live.Lock()
	tr := w.live.Tree()
	s, _ := tr.Lookup(tree.RootIno, "src")
	a, _ := tr.Lookup(s.Ino, "a.go")
	bl, _ := tr.Lookup(s.Ino, "b-link.go")
	sb, _ := tr.Lookup(s.Ino, "sub")
	bb, _ := tr.Lookup(sb.Ino, "b.go")
	w.live.Unlock()
	if a.Ino == moved.Ino {
		t.Errorf("restored a.go shares inode %d with moved.go", a.Ino)
	}
	if bl.Ino != bb.Ino || bb.Nlink != 2 {
		t.Errorf("hard link not restored: b-link.go %d, sub/b.go %d nlink %d", bl.Ino, bb.Ino, bb.Nlink)
	}
	if err := tr.Check(); err != nil {
		t.Fatal(err)
	}
	// A replay from disk agrees with the live tree.
	w.close(t)
	w.open(t)
	if d := diffStates(want, snapshotOf(t, w)); d != "" {
		t.Fatalf("after reopen: %s", d)
	}
	// Bad input changes nothing.
	head := w.j.Head()
	for _, bad := range []string{".", "/", "../x", "nope", "src/nope/x", ".reynfs/seq"} {
		if _, err := w.rw.Restore(bad, v1, ".reynfs"); !errors.Is(err, ErrTarget) {
			t.Errorf("restore %q: %v, want ErrTarget", bad, err)
		}
	}
	if w.j.Head() != head {
		t.Errorf("refused restores moved head from %d to %d", head, w.j.Head())
	}
}

// TestRestoreViewsName: the refusal follows the mount's views name. With
// the views named h, the project's own .reynfs is ordinary content that
// restores like any other, and a path under h is refused.
func TestRestoreViewsName(t *testing.T) {
	w := &workspace{dir: t.TempDir()}
	w.open(t)
	defer func() { _ = w.j.Close() }()
	c := modelCaller
	put := func(parent uint64, name, data string) uint64 {
		st, err := w.live.Lookup(parent, name)
		if err != nil {
			if st, err = w.live.Create(c, parent, name, syscall.S_IFREG|0o644, 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.live.SetAttr(c, st.Ino, tree.SetAttrIn{Valid: tree.SetSize}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.live.WriteAt(c, st.Ino, tree.NoHandle, []byte(data), 0, false); err != nil {
			t.Fatal(err)
		}
		if err := w.live.Flush(c, st.Ino); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	var dirs []uint64
	for _, name := range []string{".reynfs", "h"} {
		st, err := w.live.Mkdir(c, tree.RootIno, name, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, st.Ino)
		put(st.Ino, "x", "v1")
	}
	v1 := w.j.Head()
	for _, d := range dirs {
		put(d, "x", "v2")
	}
	if _, err := w.rw.Restore(".reynfs/x", v1, "h"); err != nil {
		t.Fatalf("restore of the project's own .reynfs/x with the views named h: %v", err)
	}
	for _, tc := range []struct{ rel, views string }{{"h/x", "h"}, {"h", "h"}, {".reynfs/x", ".reynfs"}} {
		if _, err := w.rw.Restore(tc.rel, v1, tc.views); !errors.Is(err, ErrTarget) || !strings.Contains(err.Error(), "history views") {
			t.Errorf("restore %s with the views named %s: %v, want ErrTarget naming the history views", tc.rel, tc.views, err)
		}
	}
	got := snapshotOf(t, w)
	if got[".reynfs/x"] != "f:v1" || got["h/x"] != "f:v2" {
		t.Errorf("after restores: .reynfs/x %q, h/x %q; want f:v1 and f:v2", got[".reynfs/x"], got["h/x"])
	}
}

func snapshotOf(t *testing.T, w *workspace) state {
	t.Helper()
	w.live.Lock()
	defer w.live.Unlock()
	return snapshotTree(t, w.live.Tree())
}
