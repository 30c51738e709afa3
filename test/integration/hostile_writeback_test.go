package integration

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The write-back at unmount and the import at mount run as root in a
// directory other users write (issue 8 items 1, 2, 5; DESIGN invariants 9
// and 14). These tests act as user nobody against a root mount.

// hostileBase is a directory every user can traverse (t.TempDir's
// parents are private), removed when the test ends, after its mounts.
func hostileBase(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root: the hostile user acts against a root mount")
	}
	requireFUSE(t)
	requireTool(t, "setpriv")
	base, err := os.MkdirTemp("/tmp", "reynfs-hostile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	return base
}

// mustAsNobody runs a shell script (set -e) as user nobody in dir, bounded
// in time, and fails the test if it fails.
func mustAsNobody(t *testing.T, dir, script string) {
	t.Helper()
	if out, err := asNobody(dir, "set -e\n"+script); err != nil {
		t.Fatalf("as nobody in %s: %v: %s\nscript: %s", dir, err, out, script)
	}
}

// startNobody starts a long-running script as nobody in its own process
// group; the returned stop ends that group (by its id) and waits.
func startNobody(t *testing.T, dir, script string) func() {
	t.Helper()
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("hostile process %d did not end", cmd.Process.Pid)
		}
	}
	t.Cleanup(stop)
	return stop
}

func mkfile(t *testing.T, path, data string, mode os.FileMode, uid int) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, path string, mode os.FileMode, uid int) {
	t.Helper()
	if err := os.MkdirAll(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

type fileState struct {
	data      string
	mode      os.FileMode
	uid, gid  uint32
	ino       uint64
	isRegular bool
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	s := fileState{mode: st.Mode(), uid: sys.Uid, gid: sys.Gid, ino: sys.Ino, isRegular: st.Mode().IsRegular()}
	if s.isRegular {
		b, _ := os.ReadFile(path)
		s.data = string(b)
	}
	return s
}

func TestHostileWriteback(t *testing.T) {
	base := hostileBase(t)
	proj := filepath.Join(base, "proj")
	outside := filepath.Join(base, "outside")
	secrets := filepath.Join(outside, "secrets")
	mkdir(t, proj, 0o755, 0)
	mkdir(t, filepath.Join(proj, "pub"), 0o755, nobody)
	mkdir(t, filepath.Join(proj, "pub", "sub"), 0o755, nobody)
	mkdir(t, secrets, 0o700, 0)
	const nfiles = 1500
	for i := range nfiles {
		name := fmt.Sprintf("f%04d", i)
		mkfile(t, filepath.Join(proj, "pub", "sub", name), "public\n", 0o644, nobody)
		mkfile(t, filepath.Join(secrets, name), "TOPSECRET\n", 0o600, 0)
	}
	victim := filepath.Join(outside, "victim")
	mkfile(t, victim, "victim\n", 0o644, 0)
	victimDir := filepath.Join(outside, "vdir")
	mkdir(t, victimDir, 0o755, 0)
	mkfile(t, filepath.Join(victimDir, "keep"), "keep\n", 0o644, 0)
	before := map[string]fileState{}
	for _, p := range []string{victim, victimDir, filepath.Join(victimDir, "keep"), filepath.Join(secrets, "f0000")} {
		before[p] = stateOf(t, p)
	}
	checkOutside := func(when string) {
		t.Helper()
		for p, want := range before {
			if got := stateOf(t, p); got != want {
				t.Errorf("%s: %s changed: %+v, was %+v", when, p, got, want)
			}
		}
		ents, _ := os.ReadDir(victimDir)
		if len(ents) != 1 {
			t.Errorf("%s: %s holds %d entries, want 1", when, victimDir, len(ents))
		}
	}

	// 1. During the first import, nobody keeps swapping pub/sub for a
	// symlink to root's secrets (same names, other content).
	// Absolute paths: once the mount is up, the swaps happen in it, not
	// underneath (that case is TestWritesUnderneathKept). The pauses keep
	// the link in place most of the time, and let a readdir of pub end (a
	// rename loop without pause can keep getdents finding new entries).
	pubDir := filepath.Join(proj, "pub")
	requireTool(t, "perl")
	stop := startNobody(t, "/", fmt.Sprintf(`perl -e '($p, $s) = @ARGV; while (1) {
		rename("$p/sub", "$p/sub.real"); symlink($s, "$p/sub"); select(undef, undef, undef, 0.002);
		unlink("$p/sub"); rename("$p/sub.real", "$p/sub"); select(undef, undef, undef, 0.0005) }' %s %s`,
		pubDir, secrets))
	time.Sleep(100 * time.Millisecond)

	m := mountProject(t, proj)
	stop()
	// Put the mount's pub/sub back the way it was. A walk that read pub
	// while the loop renamed can have seen the directory under both names
	// (readdir may return an entry renamed during it twice): then sub is
	// already the directory, and sub.real is the copy to drop.
	sub, real := filepath.Join(pubDir, "sub"), filepath.Join(pubDir, "sub.real")
	if _, err := os.Lstat(real); err == nil {
		if fi, err := os.Lstat(sub); err == nil && fi.IsDir() {
			if err := os.RemoveAll(real); err != nil {
				t.Fatal(err)
			}
		} else {
			_ = os.Remove(sub)
			if err := os.Rename(real, sub); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkLeak := func(when string) {
		t.Helper()
		leaked := 0
		err := filepath.WalkDir(m.Dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("TOPSECRET")) {
				leaked++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if leaked > 0 {
			t.Errorf("%s: import followed a symlink swapped in: %d files of root's secrets are in the workspace", when, leaked)
		}
	}
	checkLeak("first import")

	// 2. Inside the mount, nobody plants symlinks where the old write-back
	// put its fixed temp names, a 255-byte name, their own x.reynfs-tmp
	// and a directory named like a temp file.
	pub := filepath.Join(m.Dir, "pub")
	long := strings.Repeat("L", 255)
	script := fmt.Sprintf(`
for i in 1 2 3 4 5; do echo mine > f$i; ln -s %[1]s f$i.reynfs-tmp; done
ln -s %[2]s d.reynfs-tmp; mkdir d; echo x > d/x
echo mine > own; echo "users own" > own.reynfs-tmp
echo g > g; mkdir g.reynfs-tmp; echo inner > g.reynfs-tmp/inner
echo long > %[3]s
`, victim, victimDir, long)
	mustAsNobody(t, pub, script)
	// The swaps made between the import and the mount coming up went
	// underneath it: the write-back keeps them and says so.
	r := m.Run("unmount", m.Dir, "--store", m.Store)
	if isMounted(m.Dir) {
		t.Fatalf("unmount: exit %d: %s", r.Code, r.Stderr)
	}
	m.waitDaemonGone()
	for _, line := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
		if k, ok := strings.CutPrefix(line, "reynfs: kept "); ok && !strings.HasPrefix(k, "pub/sub") {
			t.Errorf("unmount kept %s, which nothing changed underneath: %s", k, r.Stderr)
		}
	}
	checkOutside("first write-back")
	m.Mount()
	checkLeak("remount")
	// Now the planted links are on disk, unchanged; the files beside them change.
	mustAsNobody(t, pub, fmt.Sprintf(`
for i in 1 2 3 4 5; do echo changed > f$i; chmod 666 f$i; done
echo changed > d/x; chmod 777 d
echo changed > own; echo changed > g; echo changed > %s
`, long))
	m.Unmount()
	checkOutside("second write-back")
	disk := filepath.Join(proj, "pub")
	for name, want := range map[string]string{"f1": "changed\n", "f5": "changed\n", "d/x": "changed\n", "own": "changed\n",
		"own.reynfs-tmp": "users own\n", "g": "changed\n", "g.reynfs-tmp/inner": "inner\n", long: "changed\n"} {
		if got := stateOf(t, filepath.Join(disk, name)); !got.isRegular || got.data != want {
			t.Errorf("written back %.20s: %+v, want a file holding %q", name, got, want)
		}
	}
	for _, name := range []string{"f1.reynfs-tmp", "d.reynfs-tmp"} {
		if st, err := os.Lstat(filepath.Join(disk, name)); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s: %v %v, want the user's symlink kept as a symlink", name, st, err)
		}
	}
	if got := stateOf(t, filepath.Join(disk, "f1")); got.mode.Perm() != 0o666 || got.uid != nobody {
		t.Errorf("f1: mode %v uid %d, want 0666 owned by nobody", got.mode, got.uid)
	}
}

// TestWritesUnderneathKept: a process whose cwd was in the project
// directory before the mount writes underneath it; the write-back keeps
// those files, reports them, and the next mount records them.
func TestWritesUnderneathKept(t *testing.T) {
	requireFUSE(t)
	proj := t.TempDir()
	writeFile(t, filepath.Join(proj, "a"), []byte("a1\n"), 0o644)
	writeFile(t, filepath.Join(proj, "b"), []byte("b1\n"), 0o644)
	writeFile(t, filepath.Join(proj, "e"), []byte("e1\n"), 0o644)
	ctl := t.TempDir()
	trigger, done := filepath.Join(ctl, "go"), filepath.Join(ctl, "done")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Relative names: the cwd is the directory underneath once mounted.
	cmd := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf(
		`while [ ! -e %s ]; do sleep 0.05; done; echo under > a; echo new > c; rm b; touch %s; sleep 30`, trigger, done))
	cmd.Dir = proj
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	m := &Mount{t: t, Dir: proj, Store: filepath.Join(t.TempDir(), "store"), env: testEnv(t)}
	t.Cleanup(m.cleanup)
	r := m.Run("mount", m.Dir, "--store", m.Store)
	if r.Code != 0 {
		t.Fatalf("mount: exit %d: %s", r.Code, r.Stderr)
	}
	m.pid = m.Pid()
	if want := fmt.Sprintf("pid %d (sh)", cmd.Process.Pid); !strings.Contains(r.Stderr, want) {
		t.Errorf("mount did not warn about %s inside the directory; stderr: %q", want, r.Stderr)
	}
	if !strings.Contains(m.Log(), fmt.Sprintf(`"pid":%d`, cmd.Process.Pid)) {
		t.Errorf("daemon log does not name pid %d", cmd.Process.Pid)
	}
	writeFile(t, filepath.Join(proj, "a"), []byte("mount-a\n"), 0o644)
	writeFile(t, filepath.Join(proj, "d"), []byte("mount-d\n"), 0o644)
	writeFile(t, filepath.Join(proj, "e"), []byte("mount-e\n"), 0o644)
	if err := os.WriteFile(trigger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(done); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the process underneath did not write")
		}
	}
	r = m.Run("unmount", m.Dir, "--store", m.Store)
	if isMounted(m.Dir) {
		t.Fatalf("unmount: exit %d: %s; still mounted", r.Code, r.Stderr)
	}
	m.waitDaemonGone()
	for _, p := range []string{"a", "b", "c"} {
		if !strings.Contains(r.Stderr+"\n", "\nreynfs: kept "+p+"\n") {
			t.Errorf("unmount does not report %s as kept on a line of its own: exit %d: %q", p, r.Code, r.Stderr)
		}
	}
	if !strings.Contains(m.Log(), "changed underneath the mount") {
		t.Errorf("daemon log does not report the paths kept")
	}
	want := map[string]string{"a": "under\n", "c": "new\n", "d": "mount-d\n", "e": "mount-e\n"}
	check := func(when string) {
		t.Helper()
		for name, data := range want {
			if b, err := os.ReadFile(filepath.Join(proj, name)); err != nil || string(b) != data {
				t.Errorf("%s: %s = %q (%v), want %q", when, name, b, err, data)
			}
		}
		if _, err := os.Lstat(filepath.Join(proj, "b")); err == nil {
			t.Errorf("%s: b is back; it was removed underneath", when)
		}
	}
	check("written back")
	m.Mount()
	check("remounted")
	if r := m.Run("log", "--store", m.Store); !strings.Contains(r.Stdout, "changes made while unmounted") {
		t.Errorf("the changes underneath were not recorded as a generation:\n%s", r.Stdout)
	}
	m.Unmount()
	check("unmounted again")
}

// TestWritesUnderneathKeptDirAttrs: a chmod, chown and xattr set underneath
// the mount on a directory the mount writes inside are kept by the
// write-back (not set back to the tree's), reported as kept, and recorded
// by the next mount (issue 8 item 5, DESIGN invariant 14).
func TestWritesUnderneathKeptDirAttrs(t *testing.T) {
	requireFUSE(t)
	proj := t.TempDir()
	writeFile(t, filepath.Join(proj, "s", "f"), []byte("f1\n"), 0o644)
	// A descriptor from before the mount reaches the directory underneath,
	// as a process whose cwd was inside it does.
	under, err := os.Open(proj)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { under.Close() })
	m := mountProject(t, proj)
	writeFile(t, filepath.Join(proj, "s", "f"), []byte("mount\n"), 0o644)
	ufd := int(under.Fd())
	if err := unix.Fchmodat(ufd, "s", 0o700, 0); err != nil {
		t.Fatal(err)
	}
	chowned := unix.Fchownat(ufd, "s", 65534, 65534, unix.AT_SYMLINK_NOFOLLOW) == nil
	sfd, err := unix.Openat(ufd, "s", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	xerr := unix.Fsetxattr(sfd, "user.under", []byte("1"), 0)
	unix.Close(sfd)
	if !chowned || xerr != nil {
		t.Logf("checking without chown (%v) or user xattrs (%v): not root, or not on this file system", !chowned, xerr)
	}
	r := m.Run("unmount", m.Dir, "--store", m.Store)
	if isMounted(m.Dir) {
		t.Fatalf("unmount: exit %d: %s; still mounted", r.Code, r.Stderr)
	}
	m.waitDaemonGone()
	if !strings.Contains(r.Stderr+"\n", "\nreynfs: kept s\n") {
		t.Errorf("unmount does not report s as kept on a line of its own: exit %d: %q", r.Code, r.Stderr)
	}
	check := func(when string) {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(proj, "s"), &st); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if st.Mode&0o7777 != 0o700 || (chowned && st.Uid != 65534) {
			t.Errorf("%s: s has mode %o owner %d, want the 0700 and 65534 set underneath", when, st.Mode&0o7777, st.Uid)
		}
		if _, err := unix.Lgetxattr(filepath.Join(proj, "s"), "user.under", nil); xerr == nil && err != nil {
			t.Errorf("%s: the xattr set on s underneath is gone: %v", when, err)
		}
		if b, err := os.ReadFile(filepath.Join(proj, "s", "f")); err != nil || string(b) != "mount\n" {
			t.Errorf("%s: s/f = %q (%v), want the mount's write", when, b, err)
		}
	}
	check("written back")
	m.Mount()
	check("remounted")
	if r := m.Run("log", "--store", m.Store); !strings.Contains(r.Stdout, "changes made while unmounted") {
		t.Errorf("the change underneath was not recorded as a generation:\n%s", r.Stdout)
	}
	m.Unmount()
	check("unmounted again")
}

// TestWritebackFailureDoesNotBrick: a path the write-back cannot write (an
// immutable file underneath) is reported by path, the rest is written, the
// next mount still works and records no bogus change, and once the path
// can be written again the next write-back writes it (issue 8 item 14).
func TestWritebackFailureDoesNotBrick(t *testing.T) {
	requireFUSE(t)
	chattr := requireTool(t, "chattr")
	proj := t.TempDir()
	writeFile(t, filepath.Join(proj, "x"), []byte("x1\n"), 0o644)
	writeFile(t, filepath.Join(proj, "y"), []byte("y1\n"), 0o644)
	writeFile(t, filepath.Join(proj, "z"), []byte("z1\n"), 0o644)
	x := filepath.Join(proj, "x")
	t.Cleanup(func() { _ = exec.Command(chattr, "-i", x).Run() })
	if out, err := exec.Command(chattr, "+i", x).CombinedOutput(); err != nil {
		skipOrFail(t, "chattr +i %s: %v: %s (a file system without immutable files?)", x, err, out)
	}
	m := mountProject(t, proj)
	writeFile(t, filepath.Join(proj, "x"), []byte("x2\n"), 0o644)
	writeFile(t, filepath.Join(proj, "y"), []byte("y2\n"), 0o644)
	writeFile(t, filepath.Join(proj, "w"), []byte("w1\n"), 0o644)
	if err := os.Remove(filepath.Join(proj, "z")); err != nil {
		t.Fatal(err)
	}
	r := m.Run("unmount", m.Dir, "--store", m.Store)
	if isMounted(m.Dir) {
		t.Fatalf("unmount: exit %d: %s; still mounted", r.Code, r.Stderr)
	}
	m.waitDaemonGone()
	if r.Code == 0 || !strings.Contains(r.Stderr, "\nreynfs: not written x: ") {
		t.Errorf("unmount does not report x as not written: exit %d: %q", r.Code, r.Stderr)
	}
	check := func(when string, want map[string]string) {
		t.Helper()
		for name, data := range want {
			if b, err := os.ReadFile(filepath.Join(proj, name)); err != nil || string(b) != data {
				t.Errorf("%s: %s = %q (%v), want %q", when, name, b, err, data)
			}
		}
		if _, err := os.Lstat(filepath.Join(proj, "z")); err == nil {
			t.Errorf("%s: z is back", when)
		}
	}
	check("written back", map[string]string{"x": "x1\n", "y": "y2\n", "w": "w1\n"})
	m.Mount() // the retry fails again: the mount serves head all the same
	check("remounted", map[string]string{"x": "x2\n", "y": "y2\n", "w": "w1\n"})
	if r := m.Run("log", "--store", m.Store); strings.Contains(r.Stdout, "changes made while unmounted") {
		t.Errorf("the failed path was recorded as a change made while unmounted:\n%s", r.Stdout)
	}
	r = m.Run("unmount", m.Dir, "--store", m.Store)
	if isMounted(m.Dir) || !strings.Contains(r.Stderr, "\nreynfs: not written x: ") {
		t.Fatalf("second unmount: exit %d: %q", r.Code, r.Stderr)
	}
	m.waitDaemonGone()
	check("written back twice", map[string]string{"x": "x1\n", "y": "y2\n", "w": "w1\n"})
	// Writable again: the next mount's retry writes it.
	if out, err := exec.Command(chattr, "-i", x).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v: %s", err, out)
	}
	m.Mount()
	check("remounted after chattr -i", map[string]string{"x": "x2\n", "y": "y2\n", "w": "w1\n"})
	m.Unmount()
	check("written back at last", map[string]string{"x": "x2\n", "y": "y2\n", "w": "w1\n"})
	if r := m.Run("log", "--store", m.Store); strings.Contains(r.Stdout, "changes made while unmounted") {
		t.Errorf("a change made while unmounted was recorded, though nothing changed:\n%s", r.Stdout)
	}
}
