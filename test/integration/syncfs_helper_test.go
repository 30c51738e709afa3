package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
