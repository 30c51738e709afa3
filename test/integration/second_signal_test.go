package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSecondSignalEndsBusyUnmount: SIGTERM makes the daemon unmount, and a
// process whose working directory is inside the mount keeps the lazily
// detached mount alive, so the daemon waits for it. A second SIGTERM ends
// the daemon at once, saying so in its log, and nothing acknowledged is
// lost: the store mounts again with every file written before.
func TestSecondSignalEndsBusyUnmount(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("a"), 0o644)
	m := mountProject(t, dir)
	writeFile(t, filepath.Join(m.Dir, "b"), []byte("written through the mount"), 0o644)

	busy := exec.Command("sleep", "60")
	busy.Dir = m.Dir
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = busy.Wait(); close(waited) }()
	stopBusy := func() { _ = busy.Process.Kill(); <-waited }
	t.Cleanup(stopBusy)

	pid := m.pid
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if !pidAlive(pid) {
		t.Fatalf("the daemon exited within 1.5 s of the first SIGTERM although %d keeps its mount busy: this test needs a daemon that waits; log:\n%s", busy.Process.Pid, m.LogTail(10))
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for i := 0; pidAlive(pid); i++ {
		if i == 250 {
			t.Fatalf("the daemon %d still runs 5 s after the second SIGTERM; log:\n%s", pid, m.LogTail(10))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if log := m.Log(); !strings.Contains(log, "second SIGTERM: exiting now") {
		t.Errorf("the daemon's log does not say why it exited:\n%s", m.LogTail(10))
	}
	stopBusy()
	if isMounted(m.Dir) {
		if err := syscall.Unmount(m.Dir, syscall.MNT_DETACH); err != nil {
			t.Fatalf("umount -l %s: %v", m.Dir, err)
		}
	}
	m.Mount()
	got, err := os.ReadFile(filepath.Join(m.Dir, "b"))
	if err != nil || string(got) != "written through the mount" {
		t.Fatalf("after the second signal and a new mount, b = %q, %v; want what was written", got, err)
	}
	m.Unmount()
}
