package integration

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The history views under .reynfs/ against other users and everyday tools
// (issue 8 items 4, 15, 16): a view shows no file that a user could not
// read live, --private-history keeps the views to the mount's owner,
// copying out of history gives whole files, and a project with its own
// .reynfs is refused unless the views get another name.

// vhCheckpoint cuts a generation.
func vhCheckpoint(t testing.TB, m *Mount, label string) {
	t.Helper()
	if r := m.Run("checkpoint", "-m", label, "--store", m.Store); r.Code != 0 {
		t.Fatalf("reynfs checkpoint -m %s: exit %d: %s", label, r.Code, r.Stderr)
	}
}

// denied runs script as nobody and fails the test unless it was refused
// with "Permission denied".
func denied(t testing.TB, dir, script, why string) {
	t.Helper()
	out, err := asNobody(dir, script)
	if err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("as nobody, %s: %q, %v; want Permission denied (%s)", script, out, err, why)
	}
}

// allowed runs script as nobody and fails the test unless it printed want.
func allowed(t testing.TB, dir, script, want string) {
	t.Helper()
	if out, err := asNobody(dir, script); err != nil || out != want {
		t.Errorf("as nobody, %s: %q, %v; want %q", script, out, err, want)
	}
}

// vhProject makes a project directory nobody can reach.
func vhProject(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	traversable(t, dir)
	return dir
}

// TestViewsPrivateHistory: with --private-history, user nobody reaches
// nothing under .reynfs/ (not before and not after root looked there),
// while the live tree stays as open as its modes say and root browses.
func TestViewsPrivateHistory(t *testing.T) {
	requireNobody(t)
	dir := vhProject(t)
	writeFile(t, filepath.Join(dir, "pub"), []byte("public\n"), 0o644)
	m := mountProjectArgs(t, dir, "--private-history")
	vhCheckpoint(t, m, "one")
	allowed(t, m.Dir, "cat pub", "public\n")
	for round, why := range []string{"before root looked", "after root looked (cached names)"} {
		denied(t, m.Dir, "ls .reynfs", why)
		denied(t, m.Dir, "cat .reynfs/timeline", why)
		denied(t, m.Dir, "ls .reynfs/generations", why)
		denied(t, m.Dir, "cat .reynfs/generations/g1/pub", why)
		denied(t, m.Dir, "cat .reynfs/seq/1/pub", why)
		if round == 0 {
			out := shTimeout(t, m.Dir, "ls .reynfs; ls .reynfs/generations; cat .reynfs/generations/g1/pub; cat .reynfs/timeline >/dev/null")
			if out != "generations\nseq\ntimeline\ng1\ng2\npublic\n" {
				t.Errorf("root browsing the private views: %q", out)
			}
		}
	}
}

// TestViewsKeepPermissions: a file nobody cannot read live (mode, a
// private directory, an ACL entry) stays unreadable in every view, while
// a public one is readable there as it is live.
func TestViewsKeepPermissions(t *testing.T) {
	requireNobody(t)
	requireTool(t, "setfacl")
	dir := vhProject(t)
	writeFile(t, filepath.Join(dir, "pub"), []byte("public\n"), 0o644)
	writeFile(t, filepath.Join(dir, "secret"), []byte("s\n"), 0o600)
	writeFile(t, filepath.Join(dir, "private", "inner"), []byte("i\n"), 0o644)
	if err := os.Chmod(filepath.Join(dir, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	m := mountProject(t, dir)
	shTimeout(t, m.Dir, "echo a > denied; chmod 644 denied; setfacl -m u:65534:--- denied")
	vhCheckpoint(t, m, "one")
	for _, base := range []string{".", ".reynfs/generations/g2", ".reynfs/generations/g1"} {
		allowed(t, m.Dir, "cat "+base+"/pub", "public\n")
		denied(t, m.Dir, "cat "+base+"/secret", "0600 root file")
		denied(t, m.Dir, "cat "+base+"/private/inner", "inside a 0700 root directory")
		denied(t, m.Dir, "ls "+base+"/private", "a 0700 root directory")
		if base != ".reynfs/generations/g1" { // the import: no ACL yet
			denied(t, m.Dir, "cat "+base+"/denied", "ACL entry u:nobody:---")
		}
	}
}

// TestViewsCopyOut: cp, cp -a, cat >, copy_file_range(2) and rsync from a
// view into the live tree copy whole files (they got ESTALE and left
// empty files when copy_file_range went to the live tree with a view's
// node).
func TestViewsCopyOut(t *testing.T) {
	requireTool(t, "rsync")
	dir := t.TempDir()
	big := make([]byte, 300_000) // several 64 KiB chunks
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "big"), big, 0o644)
	writeFile(t, filepath.Join(dir, "small"), []byte("small\n"), 0o640)
	if err := unix.Setxattr(filepath.Join(dir, "small"), "user.note", []byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	m := mountProject(t, dir)
	checkFds(t)
	vhCheckpoint(t, m, "one")
	shTimeout(t, m.Dir, `v=.reynfs/generations/g2
cp $v/big big.cp; cp -a $v/small small.cpa; cat $v/big > big.cat; cp -a $v restored
rsync -a $v/ rsynced/`)
	// copy_file_range(2) itself, as cp and cat use it.
	src, err := os.Open(filepath.Join(m.Dir, ".reynfs/generations/g2/big"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(filepath.Join(m.Dir, "big.cfr"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	var copied int
	for copied < len(big) {
		n, err := unix.CopyFileRange(int(src.Fd()), nil, int(dst.Fd()), nil, len(big)-copied, 0)
		if err != nil {
			t.Fatalf("copy_file_range from a view after %d bytes: %v", copied, err)
		}
		if n == 0 {
			break
		}
		copied += n
	}
	for name, want := range map[string][]byte{"big.cp": big, "big.cat": big, "big.cfr": big, "restored/big": big,
		"rsynced/big": big, "small.cpa": []byte("small\n"), "restored/small": []byte("small\n"), "rsynced/small": []byte("small\n")} {
		got, err := os.ReadFile(filepath.Join(m.Dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s copied out of history: %d bytes, %v; want %d bytes equal to the stored file", name, len(got), err, len(want))
		}
	}
	buf := make([]byte, 16)
	if n, err := unix.Getxattr(filepath.Join(m.Dir, "small.cpa"), "user.note", buf); err != nil || string(buf[:n]) != "kept" {
		t.Errorf("cp -a out of history: user.note = %q, %v; want kept", buf[:n], err)
	}
}

// TestViewsOwnReynfs: a project with its own .reynfs is refused with one
// line that names --views-name; with --views-name the user's .reynfs is an
// ordinary directory (listed, readable, writable, written back) and the
// views answer under the other name, never listed.
func TestViewsOwnReynfs(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".reynfs", "notes"), []byte("mine\n"), 0o644)
	env := testEnv(t)
	store := filepath.Join(t.TempDir(), "store")
	r := runReynfs(env, "mount", dir, "--store", store)
	if r.Code != 2 || isMounted(dir) {
		if isMounted(dir) {
			_ = unix.Unmount(dir, unix.MNT_DETACH)
		}
		t.Fatalf("mount over a project with its own .reynfs: exit %d, stderr %q; want exit 2 and no mount", r.Code, r.Stderr)
	}
	if msg := strings.TrimSpace(r.Stderr); strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "--views-name") || !strings.Contains(msg, ".reynfs") {
		t.Errorf("refusal: %q; want one line naming .reynfs and --views-name", msg)
	}
	if _, err := os.Stat(store); !os.IsNotExist(err) {
		t.Errorf("a refused mount left a store behind: %v", err)
	}
	for _, bad := range []string{"a/b", "..", ""} {
		if r := runReynfs(env, "mount", dir, "--store", store, "--views-name", bad); r.Code != 2 || isMounted(dir) {
			t.Fatalf("mount --views-name %q: exit %d, %q; want exit 2 and no mount", bad, r.Code, r.Stderr)
		}
	}

	m := mountProjectArgs(t, dir, "--views-name", ".history")
	vhCheckpoint(t, m, "one")
	out := shTimeout(t, m.Dir, `ls -A; cat .reynfs/notes; echo changed > .reynfs/notes; ls .reynfs
ls .history; ls .history/generations; cat .history/generations/g2/.reynfs/notes`)
	if want := ".reynfs\nmine\nnotes\ngenerations\nseq\ntimeline\ng1\ng2\nmine\n"; out != want {
		t.Errorf("ls -A, the user's .reynfs, the views as .history:\n%q\nwant\n%q", out, want)
	}
	// Readdir and lookup agree, also after the root was listed.
	if out := shTimeout(t, m.Dir, "ls -A >/dev/null; cat .reynfs/notes; ls -A | grep -c history || true"); out != "changed\n0\n" {
		t.Errorf("after a readdir of the root: %q; want the user's .reynfs and no .history listed", out)
	}
	if err := os.Mkdir(filepath.Join(m.Dir, ".history"), 0o755); err == nil {
		t.Errorf("mkdir .history over the views: %v, want an error", err)
	}
	m.Unmount()
	if b, err := os.ReadFile(filepath.Join(dir, ".reynfs", "notes")); err != nil || string(b) != "changed\n" {
		t.Errorf("write-back of the user's .reynfs/notes: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".history")); !os.IsNotExist(err) {
		t.Errorf("the views' name reached the project directory: %v", err)
	}
}
