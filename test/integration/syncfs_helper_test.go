package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The checkpoint's and rewind's syncfs runs in one helper process per
// mount (fs/syncfs.go), not in a process started per call (which cost
// more than the rest of a checkpoint) and never in the daemon (issue 8
// item 8). These tests pin that helper's life: one for the mount's whole
// life, replaced when it dies, gone when the daemon goes.

// syncfsHelpers returns the pids of daemon's children running the syncfs
// helper.
func syncfsHelpers(t *testing.T, daemon int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state ppid ...
		if len(f) < 2 || f[1] != strconv.Itoa(daemon) || f[0] == "Z" {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if args := bytes.Split(cmdline, []byte{0}); len(args) > 1 && string(args[1]) == "__reynfs-syncfs" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// oneSyncfsHelper returns the daemon's single syncfs helper.
func oneSyncfsHelper(t *testing.T, m *Mount) int {
	t.Helper()
	pids := syncfsHelpers(t, m.pid)
	if len(pids) != 1 {
		t.Fatalf("daemon %d has %d syncfs helpers (%v), want exactly 1", m.pid, len(pids), pids)
	}
	return pids[0]
}

// waitPidGone waits up to d for pid to exit (or become a zombie).
func waitPidGone(pid int, d time.Duration) bool {
	for start := time.Now(); time.Since(start) < d; time.Sleep(20 * time.Millisecond) {
		if !pidAlive(pid) {
			return true
		}
	}
	return false
}

func checkpointOK(t *testing.T, m *Mount, label string) {
	t.Helper()
	r := runWithin(t, m, 30*time.Second, "checkpoint", "-m", label, "--store", m.Store)
	if r.Code != 0 {
		t.Fatalf("reynfs checkpoint %s: exit %d: %s\nlog:\n%s", label, r.Code, r.Stderr, m.LogTail(10))
	}
}

func TestSyncfsHelperLivesWithMount(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("a\n"), 0o644)
	m := mountProject(t, dir)
	helper := oneSyncfsHelper(t, m)
	// A descriptor open O_RDWR could back a shared writable mapping, so
	// every checkpoint below asks the helper for a syncfs.
	rw, err := os.OpenFile(filepath.Join(dir, "a"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rw.Close() })
	for i := range 5 {
		writeFile(t, filepath.Join(dir, "a"), []byte(strconv.Itoa(i)), 0o644)
		checkpointOK(t, m, "c"+strconv.Itoa(i))
	}
	if h := oneSyncfsHelper(t, m); h != helper {
		t.Fatalf("syncfs helper changed from %d to %d across checkpoints: a process per call", helper, h)
	}

	// A helper that died is replaced, and the checkpoint that found it
	// dead still succeeds.
	if err := syscall.Kill(helper, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 helper %d: %v", helper, err)
	}
	if !waitPidGone(helper, 5*time.Second) {
		t.Fatalf("syncfs helper %d alive 5s after kill -9", helper)
	}
	checkpointOK(t, m, "after-helper-kill")
	if h := oneSyncfsHelper(t, m); h == helper {
		t.Fatalf("syncfs helper %d not replaced", h)
	} else {
		helper = h
	}

	// With no descriptor open O_RDWR no page can be dirty in the kernel,
	// and a checkpoint skips the syncfs: a killed helper stays unreplaced.
	rw.Close()
	if err := syscall.Kill(helper, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 helper %d: %v", helper, err)
	}
	if !waitPidGone(helper, 5*time.Second) {
		t.Fatalf("syncfs helper %d alive 5s after kill -9", helper)
	}
	deadline := time.Now().Add(5 * time.Second)
	for { // the kernel's RELEASE of rw is asynchronous
		checkpointOK(t, m, "no-rdwr")
		if len(syncfsHelpers(t, m.pid)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoints with no O_RDWR descriptor open still ask for a syncfs")
		}
		// a helper started for a RELEASE not yet arrived: kill it, try again
		for _, h := range syncfsHelpers(t, m.pid) {
			_ = syscall.Kill(h, syscall.SIGKILL)
			waitPidGone(h, 5*time.Second)
		}
	}

	// The next syncfs (a descriptor open O_RDWR again) starts a helper.
	rw2, err := os.OpenFile(filepath.Join(dir, "a"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkpointOK(t, m, "rdwr-again")
	helper = oneSyncfsHelper(t, m)
	rw2.Close()

	m.Unmount()
	if !waitPidGone(helper, 5*time.Second) {
		t.Fatalf("syncfs helper %d still running 5s after unmount", helper)
	}
}

func TestSyncfsHelperDiesWithDaemon(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	helper := oneSyncfsHelper(t, m)
	checkpointOK(t, m, "c")
	m.Kill9()
	if !waitPidGone(helper, 5*time.Second) {
		_ = syscall.Kill(helper, syscall.SIGKILL)
		t.Fatalf("syncfs helper %d still running 5s after kill -9 of its daemon", helper)
	}
}

// TestMmapDirtyAfterClose: a checkpoint skips the syncfs only when no
// handle is open O_RDWR; a shared mapping whose descriptor was closed
// keeps its handle open (RELEASE waits for munmap), so its dirty pages,
// never msync'd, still reach the checkpoint.
func TestMmapDirtyAfterClose(t *testing.T) {
	m := mountProject(t, t.TempDir())
	p := filepath.Join(m.Dir, "mapped.bin")
	size := 64 << 10
	want := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	writeFile(t, p, want, 0o644)
	fd, mem := coreMmap(t, p, size)
	unix.Close(fd)
	t.Cleanup(func() { _ = unix.Munmap(mem) })
	copy(mem[5000:], "DIRTY, fd closed")
	copy(want[5000:], "DIRTY, fd closed")
	rwCheckpoint(t, m, "dirty")
	gens := rwLog(t, m).Gens
	got, err := os.ReadFile(filepath.Join(m.Dir, ".reynfs", "generations", fmt.Sprintf("g%d", gens[0].ID), "mapped.bin"))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("a checkpoint cut while a shared mapping (its descriptor closed) has dirty pages misses them: view differs at %d (%v)",
			coreFirstDiff(got, want), err)
	}
	if err := unix.Munmap(mem); err != nil {
		t.Fatal(err)
	}
}
