package integration

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// importTree writes a project for a first mount: a few thousand small
// files in many directories (the import reads them on several readers),
// larger and sparse files, hard links whose names sit in different
// directories, symlinks, a FIFO, an xattr and an empty directory.
func importTree(t *testing.T, dir string) {
	t.Helper()
	for i := range 3000 {
		p := filepath.Join(dir, fmt.Sprintf("t%d", i/1000), fmt.Sprintf("d%02d", i/100%10), fmt.Sprintf("f%02d.txt", i%100))
		writeFile(t, p, fmt.Appendf(nil, "file %d\n%s", i, strings.Repeat("x", i%700)), 0o644)
	}
	big := make([]byte, 300<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	writeFile(t, filepath.Join(dir, "big.bin"), big, 0o600)
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt([]byte("middle"), 5<<20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"t2/d09/f99.txt", "t0/early-link"}, {"big.bin", "t1/d05/big-link"}} {
		if err := os.Link(filepath.Join(dir, l[0]), filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range [][2]string{{"t0/d00/f00.txt", "rel-link"}, {"/etc/hostname", "t1/abs-link"}} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mkfifo(filepath.Join(dir, "t0", "fifo"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(dir, "t1", "d03", "f07.txt"), "user.import", []byte("kept"), 0); err != nil {
		t.Logf("no user xattrs on %s: %v", dir, err)
	}
}

// importPrint describes every entry below root without its inode number
// (the mount numbers its own): type and mode, size, mtime, content hash,
// link target, link count, user xattr.
func importPrint(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == ".reynfs" {
			return filepath.SkipDir
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode %o mtime %d", st.Mode, st.Mtim.Nano())
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR: // a directory's size is the file system's own
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case unix.S_IFREG:
			desc += fmt.Sprintf(" size %d", st.Size)
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" nlink %d sha256 %x", st.Nlink, sha256.Sum256(b))
			buf := make([]byte, 64)
			if n, err := unix.Lgetxattr(p, "user.import", buf); err == nil {
				desc += " xattr " + string(buf[:n])
			}
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFirstMountImportsTree: the first mount of a tree of a few thousand
// files (imported in parallel) serves every entry as the directory held
// it, hard links as one inode, and prints no progress to a non-terminal.
func TestFirstMountImportsTree(t *testing.T) {
	requireFUSE(t)
	dir := filepath.Join(t.TempDir(), "proj")
	importTree(t, dir)
	want := importPrint(t, dir)
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &Mount{t: t, Dir: abs, Store: filepath.Join(t.TempDir(), "store"), env: testEnv(t)}
	t.Cleanup(m.cleanup)
	for round := range 2 { // the first mount imports; the second checks against it
		r := m.Run("mount", m.Dir, "--store", m.Store)
		if r.Code != 0 || !isMounted(m.Dir) {
			t.Fatalf("mount %d: exit %d: %s\nlog:\n%s", round, r.Code, r.Stderr, m.LogTail(10))
		}
		m.pid = m.Pid()
		if strings.Contains(r.Stderr, "importing") {
			t.Errorf("mount %d: progress on a pipe: %q", round, r.Stderr)
		}
		got := importPrint(t, dir)
		for rel, w := range want {
			if g := got[rel]; g != w {
				t.Errorf("mount %d: %s: mounted %q, native %q", round, rel, g, w)
			}
		}
		for rel := range got {
			if _, ok := want[rel]; !ok {
				t.Errorf("mount %d: %s: in the mount, not in the directory", round, rel)
			}
		}
		for _, group := range [][2]string{{"t2/d09/f99.txt", "t0/early-link"}, {"big.bin", "t1/d05/big-link"}} {
			var a, b unix.Stat_t
			if err := unix.Lstat(filepath.Join(dir, group[0]), &a); err != nil {
				t.Fatal(err)
			}
			if err := unix.Lstat(filepath.Join(dir, group[1]), &b); err != nil {
				t.Fatal(err)
			}
			if a.Ino != b.Ino || a.Nlink != 2 {
				t.Errorf("mount %d: %s and %s: inodes %d and %d, nlink %d: want one inode with two names", round, group[0], group[1], a.Ino, b.Ino, a.Nlink)
			}
		}
		m.Unmount()
	}
}
