package rewind

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUnderneathKeepsDirAttrs: a chmod, chown or xattr set underneath on
// a directory the mount wrote inside is kept by the write-back, reported,
// and read by the next import; a directory whose attributes the mount
// changed and a write-back already set is not taken for such a change
// (issue 8 item 5, DESIGN invariant 14).
func TestUnderneathKeepsDirAttrs(t *testing.T) {
	m := newTreeMaker()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "s", "f"), "f1\n")
	writeFile(t, filepath.Join(src, "m", "g"), "g1\n")
	base := m.tree(t, src, nil)
	out := t.TempDir()
	if err := Export(base, nil, out); err != nil {
		t.Fatal(err)
	}
	// In the mount: s/f rewritten, m chmodded.
	writeFile(t, filepath.Join(src, "s", "f"), "f-mount\n")
	if err := os.Chmod(filepath.Join(src, "m"), 0o750); err != nil {
		t.Fatal(err)
	}
	next := m.tree(t, src, base)

	// Underneath: s and the root chmodded, s chowned and given an xattr
	// where this user and file system allow; m already as the mount has it
	// (a write-back a crash interrupted had set it).
	s := filepath.Join(out, "s")
	for p, mode := range map[string]os.FileMode{s: 0o700, out: 0o751, filepath.Join(out, "m"): 0o750} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	chowned := os.Chown(s, 65534, 65534) == nil
	xattr := unix.Setxattr(s, "user.under", []byte("1"), 0) == nil
	top, err := OpenDir(out)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	k, err := Underneath(m.store, top, base, next, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(k.List, " ") != ". s" || !k.Attrs[""] || !k.Attrs["s"] || len(k.Attrs) != 2 || len(k.Paths) != 0 {
		t.Fatalf("kept %v (attributes of %v, whole paths %v), want the attributes of . and s", k.List, k.Attrs, k.Paths)
	}
	if err := ExportAt(next, top, ExportOptions{Base: base, Keep: k.Paths, KeepAttrs: k.Attrs}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(s, "f")); got != "f-mount\n" {
		t.Errorf("s/f = %q, the mount's write was not written back", got)
	}
	var st unix.Stat_t
	for p, mode := range map[string]uint32{s: 0o700, out: 0o751, filepath.Join(out, "m"): 0o750} {
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&0o7777 != mode {
			t.Errorf("%s: mode %o after the write-back, want %o", p, st.Mode&0o7777, mode)
		}
	}
	if err := unix.Lstat(s, &st); err != nil {
		t.Fatal(err)
	}
	ns, _ := lookupPath(next, "s")
	if st.Mtim.Nano() != ns.Mtime {
		t.Errorf("s: mtime %d, want the tree's %d (times are still written)", st.Mtim.Nano(), ns.Mtime)
	}
	if chowned && st.Uid != 65534 {
		t.Errorf("s: owner %d after the write-back, want 65534 (chowned underneath)", st.Uid)
	}
	if _, err := unix.Getxattr(s, "user.under", nil); xattr && err != nil {
		t.Errorf("s: xattr set underneath is gone: %v", err)
	}

	// The next mount's import (against next, what was written) reads
	// them: they reach the store.
	again := m.tree(t, out, next)
	n, err := lookupPath(again, "s")
	if err != nil {
		t.Fatal(err)
	}
	if n.Mode&0o7777 != 0o700 || (chowned && n.Uid != 65534) {
		t.Errorf("import after the write-back: s mode %o owner %d", n.Mode&0o7777, n.Uid)
	}
	if _, err := n.Xattr("user.under"); xattr && err != nil {
		t.Errorf("import after the write-back: s lacks the xattr: %v", err)
	}
	if !chowned || !xattr {
		t.Logf("checked without chown (%v) or user xattrs (%v): not root or not supported here", !chowned, !xattr)
	}
	if _, err := os.Lstat(filepath.Join(out, "s", "f")); errors.Is(err, os.ErrNotExist) {
		t.Errorf("s/f removed")
	}
}
