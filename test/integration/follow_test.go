package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// followJSON is status --json's "follow" object.
type followJSON struct {
	Source     string  `json:"source"`
	State      string  `json:"state"`
	LocalSeq   uint64  `json:"local_seq"`
	RemoteSeq  uint64  `json:"remote_seq"`
	LagRecords uint64  `json:"lag_records"`
	LagSeconds float64 `json:"lag_seconds"`
	LastError  string  `json:"last_error"`
	Reason     string  `json:"reason"`
}

func followStatus(t *testing.T, m *Mount) (uint64, *followJSON) {
	t.Helper()
	r := m.Run("status", m.Dir, "--store", m.Store, "--json")
	if r.Code != 0 {
		t.Fatalf("reynfs status: exit %d: %s", r.Code, r.Stderr)
	}
	var st struct {
		HeadSeq uint64      `json:"head_seq"`
		Follow  *followJSON `json:"follow"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
		t.Fatalf("status --json: %v: %s", err, r.Stdout)
	}
	return st.HeadSeq, st.Follow
}

// followMount mounts a new follower of src at dir (a lazy clone first).
func followMount(t *testing.T, src, dir, store string, extra ...string) *Mount {
	t.Helper()
	f := &Mount{t: t, Dir: dir, Store: store, env: testEnv(t)}
	t.Cleanup(f.cleanup)
	args := append([]string{"mount", "--follow", src, dir, "--store", store, "--follow-every", "100ms"}, extra...)
	if r := f.Run(args...); r.Code != 0 {
		t.Fatalf("reynfs %s: exit %d: %s%s\nlog:\n%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr, f.LogTail(20))
	}
	f.pid = f.Pid()
	return f
}

// waitFile polls path until it holds want ("" with gone: until it is
// gone).
func waitFile(t *testing.T, f *Mount, path, want string, gone bool) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if gone && errors.Is(err, os.ErrNotExist) || !gone && err == nil && string(b) == want {
			t.Logf("%s as expected after %s", filepath.Base(path), time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			_, st := followStatus(t, f)
			t.Fatalf("%s never became %q (gone %v): %q, %v; follow status %+v\nlog:\n%s", path, want, gone, b, err, st, f.LogTail(10))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shipped waits until the writer's continuous sync holds its head.
func shipped(t *testing.T, w *Mount) uint64 {
	t.Helper()
	fsyncWrite(t, filepath.Join(w.Dir, ".marker"), []byte(time.Now().String()))
	head := syncStatus(t, w).HeadSeq
	waitRemote(t, w, head)
	return head
}

// TestFollowMount: a follower mount on a second store sees what a writer
// with --sync continuous does (a file changed in place, grown and
// truncated, renamed, deleted, a new directory), read through fresh
// opens and through a descriptor held across the steps (each read whole
// is the old content or the new, and the new arrives: the kernel's page
// cache was invalidated); it is a read-only mount that refuses every
// write (EROFS), and checkpoint and push; status shows it following.
// Unmounted, its store holds exactly the remote's seqs (fsck clean); a
// plain mount keeps following.
func TestFollowMount(t *testing.T) {
	requireFUSE(t)
	remote := t.TempDir()
	w := syncedMount(t, "file://"+remote)
	oldBody := bytes.Repeat([]byte("A"), 8192)
	newBody := bytes.Repeat([]byte("B"), 8192)
	fsyncWrite(t, filepath.Join(w.Dir, "held.txt"), oldBody)
	fsyncWrite(t, filepath.Join(w.Dir, "grow.txt"), []byte("one\n"))
	fsyncWrite(t, filepath.Join(w.Dir, "old-name.txt"), []byte("renamed\n"))
	fsyncWrite(t, filepath.Join(w.Dir, "doomed.txt"), []byte("deleted\n"))
	shipped(t, w)

	base := t.TempDir()
	f := followMount(t, "file://"+remote+"#proj", filepath.Join(base, "follower"), filepath.Join(base, "fstore"))
	waitFile(t, f, filepath.Join(f.Dir, "grow.txt"), "one\n", false)
	waitFile(t, f, filepath.Join(f.Dir, "README"), "synced\n", false)
	held, err := os.Open(filepath.Join(f.Dir, "held.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	buf := make([]byte, len(oldBody))
	if n, err := held.ReadAt(buf, 0); n != len(buf) || !bytes.Equal(buf, oldBody) {
		t.Fatalf("held.txt before: %d bytes, %v", n, err)
	}

	// The writer changes things; the follower follows.
	wf, err := os.OpenFile(filepath.Join(w.Dir, "held.txt"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wf.WriteAt(newBody, 0); err != nil {
		t.Fatal(err)
	}
	if err := wf.Close(); err != nil {
		t.Fatal(err)
	}
	fsyncWrite(t, filepath.Join(w.Dir, "grow.txt"), []byte("one\ntwo\nthree\n"))
	if err := os.Rename(filepath.Join(w.Dir, "old-name.txt"), filepath.Join(w.Dir, "new-name.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(w.Dir, "doomed.txt")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.Dir, "sub", "deep", "new.txt"), []byte("new dir\n"), 0o644)
	grown := shipped(t, w)
	waitFile(t, f, filepath.Join(f.Dir, "grow.txt"), "one\ntwo\nthree\n", false)
	waitFile(t, f, filepath.Join(f.Dir, "new-name.txt"), "renamed\n", false)
	waitFile(t, f, filepath.Join(f.Dir, "old-name.txt"), "", true)
	waitFile(t, f, filepath.Join(f.Dir, "doomed.txt"), "", true)
	waitFile(t, f, filepath.Join(f.Dir, "sub", "deep", "new.txt"), "new dir\n", false)
	// Through the descriptor opened before: old or new, never a mix,
	// and the new content arrives.
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := held.ReadAt(buf, 0)
		if n != len(buf) {
			t.Fatalf("held fd: read %d bytes, %v", n, err)
		}
		if bytes.Equal(buf, newBody) {
			break
		}
		if !bytes.Equal(buf, oldBody) {
			t.Fatalf("held fd: a mix of old and new content: %q...", buf[:64])
		}
		if time.Now().After(deadline) {
			t.Fatal("held fd still reads the old content (kernel cache not invalidated?)")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := os.Truncate(filepath.Join(w.Dir, "grow.txt"), 4); err != nil {
		t.Fatal(err)
	}
	shipped(t, w)
	waitFile(t, f, filepath.Join(f.Dir, "grow.txt"), "one\n", false)
	// The history views show the fetched past.
	if b, err := os.ReadFile(filepath.Join(f.Dir, ".reynfs", "seq", strconv.FormatUint(grown, 10), "grow.txt")); err != nil || string(b) != "one\ntwo\nthree\n" {
		t.Errorf(".reynfs/seq/%d/grow.txt in the follower: %q, %v", grown, b, err)
	}

	// Read-only: the kernel mount, every mutation, the control methods.
	if !mountedReadOnly(t, f.Dir) {
		t.Errorf("%s is not mounted ro", f.Dir)
	}
	headBefore, _ := followStatus(t, f)
	for name, op := range map[string]func() error{
		"write":  func() error { return os.WriteFile(filepath.Join(f.Dir, "grow.txt"), []byte("x"), 0o644) },
		"create": func() error { return os.WriteFile(filepath.Join(f.Dir, "fresh.txt"), []byte("x"), 0o644) },
		"mkdir":  func() error { return os.Mkdir(filepath.Join(f.Dir, "d"), 0o755) },
		"remove": func() error { return os.Remove(filepath.Join(f.Dir, "grow.txt")) },
		"rename": func() error { return os.Rename(filepath.Join(f.Dir, "grow.txt"), filepath.Join(f.Dir, "g2")) },
		"chmod":  func() error { return os.Chmod(filepath.Join(f.Dir, "grow.txt"), 0o600) },
		"truncate": func() error {
			return os.Truncate(filepath.Join(f.Dir, "grow.txt"), 0)
		},
	} {
		if err := op(); !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s in the follower: %v, want EROFS", name, err)
		}
	}
	for _, args := range [][]string{
		{"checkpoint", "-m", "mine", "--dir", f.Dir, "--store", f.Store},
		{"push", "--dir", f.Dir, "--store", f.Store},
	} {
		r := f.Run(args...)
		if r.Code == 0 || !strings.Contains(r.Stderr, f.Dir+" follows file://"+remote+"#proj: read-only") {
			t.Errorf("reynfs %s on a follower: exit %d: %s", args[0], r.Code, r.Stderr)
		}
	}
	head, st := followStatus(t, f)
	if st == nil || st.State != "following" || st.LocalSeq != head || st.RemoteSeq != head || st.LagRecords != 0 {
		t.Fatalf("status: head %d, follow %+v", head, st)
	}
	if head != headBefore || head != syncStatus(t, w).Remotes[0].Shipped {
		t.Fatalf("follower head %d (before the refused writes %d), the remote's %d", head, headBefore, syncStatus(t, w).Remotes[0].Shipped)
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}

	// Unmounted: the store is the remote's prefix (fsck'd by Unmount's
	// helpers at cleanup); a plain mount keeps following.
	f.Unmount()
	if r := f.Run("fsck", "--store", f.Store); r.Code != 0 {
		t.Fatalf("fsck of the follower: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := f.Run("status", f.Dir, "--store", f.Store); !strings.Contains(r.Stdout, fmt.Sprintf("read-only; holds seq %d", head)) {
		t.Errorf("status of the unmounted follower (head %d): exit %d: %s%s", head, r.Code, r.Stdout, r.Stderr)
	}
	for _, args := range [][]string{
		{"push", "--dir", f.Dir, "--store", f.Store},
		{"rewind", "-1", "--dir", f.Dir, "--store", f.Store},
	} {
		r := f.Run(args...)
		if r.Code == 0 || !strings.Contains(r.Stderr, "follows file://"+remote+"#proj: read-only") || strings.Count(strings.TrimSpace(r.Stderr), "\n") > 0 {
			t.Errorf("reynfs %s on an unmounted follower: exit %d: %s", args[0], r.Code, r.Stderr)
		}
	}
	f.Mount()
	t0 := time.Now()
	fsyncWrite(t, filepath.Join(w.Dir, "grow.txt"), []byte("after the remount\n"))
	waitFile(t, f, filepath.Join(f.Dir, "grow.txt"), "after the remount\n", false)
	t.Logf("from the writer's fsync to the follower's read: %s (ship every 1 s, follow every 100 ms)", time.Since(t0).Round(time.Millisecond))
	if _, st := followStatus(t, f); st == nil || st.State != "following" {
		t.Fatalf("after a plain mount: follow %+v", st)
	}
	f.Unmount()
	if r := f.Run("mount", f.Dir, "--store", f.Store, "--sync", "continuous"); r.Code == 0 || !strings.Contains(r.Stderr, f.Dir+" follows file://"+remote+"#proj: read-only") {
		t.Errorf("mount --sync continuous of a follower: exit %d: %s", r.Code, r.Stderr)
		if r.Code == 0 {
			f.pid = f.Pid()
		}
	}
}

// mountedReadOnly reports whether the mount at point has the ro option.
func mountedReadOnly(t *testing.T, point string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) > 5 && fs[4] == point {
			for _, o := range strings.Split(fs[5], ",") {
				if o == "ro" {
					return true
				}
			}
			return false
		}
	}
	t.Fatalf("%s is not in mountinfo", point)
	return false
}

// TestFollowTakeoverOutage: a follower keeps following across a takeover
// (clone --take, then pushes from the new writer in a new epoch), keeps
// serving while the remote is unreachable (status: backing off, with the
// error) and catches up once it is back.
func TestFollowTakeoverOutage(t *testing.T) {
	requireFUSE(t)
	base := t.TempDir()
	remote := filepath.Join(base, "remote")
	if err := os.Mkdir(remote, 0o700); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(base, "proj")
	writeFile(t, filepath.Join(src, "a.txt"), []byte("first writer\n"), 0o644)
	w := mountProject(t, src)
	w.Unmount()
	for _, args := range [][]string{
		{"remote", "add", "origin", "file://" + remote, "--dir", src, "--store", w.Store},
		{"push", "--dir", src, "--store", w.Store},
	} {
		if r := w.Run(args...); r.Code != 0 {
			t.Fatalf("reynfs %s: exit %d: %s%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
		}
	}
	f := followMount(t, "file://"+remote+"#proj", filepath.Join(base, "follower"), filepath.Join(base, "fstore"), "--prefetch=false")
	waitFile(t, f, filepath.Join(f.Dir, "a.txt"), "first writer\n", false)

	// A second machine takes the workspace over and pushes.
	n := &Mount{t: t, Dir: filepath.Join(base, "second", "proj"), Store: filepath.Join(base, "nstore"), env: testEnv(t)}
	t.Cleanup(n.cleanup)
	if r := n.Run("clone", "--take", "file://"+remote+"#proj", n.Dir, "--store", n.Store); r.Code != 0 {
		t.Fatalf("clone --take: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	push := func(body string) {
		t.Helper()
		writeFile(t, filepath.Join(n.Dir, "a.txt"), []byte(body), 0o644)
		n.Mount() // records the change made while unmounted
		n.Unmount()
		if r := n.Run("push", "--dir", n.Dir, "--store", n.Store); r.Code != 0 {
			t.Fatalf("push from the new writer: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
		}
	}
	push("second writer\n")
	var h struct {
		Epochs []json.RawMessage `json:"epochs"`
	}
	if b, err := os.ReadFile(filepath.Join(remote, "ws", "proj", "HEAD")); err != nil || json.Unmarshal(b, &h) != nil || len(h.Epochs) < 2 {
		t.Fatalf("HEAD after the takeover: %d epochs, %v", len(h.Epochs), err)
	}
	waitFile(t, f, filepath.Join(f.Dir, "a.txt"), "second writer\n", false)

	// The remote goes away: the follower serves what it has and says so.
	away := remote + ".away"
	if err := os.Rename(filepath.Join(remote, "ws"), away); err != nil {
		t.Fatal(err)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			_ = os.Rename(away, filepath.Join(remote, "ws"))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, st := followStatus(t, f)
		if st != nil && st.State == "backing-off" && st.LastError != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower never said the remote is down: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if b, err := os.ReadFile(filepath.Join(f.Dir, "a.txt")); err != nil || string(b) != "second writer\n" {
		t.Fatalf("a.txt while the remote is down: %q, %v", b, err)
	}
	if r := f.Run("status", f.Dir, "--store", f.Store); r.Code != 0 || !strings.Contains(r.Stdout, "backing-off") {
		t.Errorf("status while the remote is down: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	if err := os.Rename(away, filepath.Join(remote, "ws")); err != nil {
		t.Fatal(err)
	}
	restored = true
	push("third, after the outage\n")
	waitFile(t, f, filepath.Join(f.Dir, "a.txt"), "third, after the outage\n", false)
	if _, st := followStatus(t, f); st == nil || st.State != "following" {
		t.Fatalf("after the outage: %+v", st)
	}

	// kill -9 of the follower: a plain mount resumes following.
	f.Kill9()
	push("fourth, while the follower was dead\n")
	f.Mount()
	waitFile(t, f, filepath.Join(f.Dir, "a.txt"), "fourth, while the follower was dead\n", false)
	head, st := followStatus(t, f)
	if st == nil || st.State != "following" || st.LocalSeq != head || st.RemoteSeq != head {
		t.Fatalf("after kill -9 and a mount: head %d, %+v", head, st)
	}
}
