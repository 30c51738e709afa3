package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWritesUnderneathKeptByCtime: the check for writes underneath at
// unmount compares ctimes with the time the import started (rewind.
// UnderneathSince). A file rewritten underneath with the same size and its
// mtime put back (only its ctime tells) is kept and reported, a later
// unmount with nothing changed keeps nothing, and the mount's changes are
// written back after it (issue 8 item 5, DESIGN invariant 14).
func TestWritesUnderneathKeptByCtime(t *testing.T) {
	requireFUSE(t)
	proj := t.TempDir()
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, name := range []string{"e", "ref", "g"} {
		writeFile(t, filepath.Join(proj, name), []byte(name+"1\n"), 0o644)
		if err := os.Chtimes(filepath.Join(proj, name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	// Older than the check's slack when the import starts.
	time.Sleep(1200 * time.Millisecond)
	ctl := t.TempDir()
	trigger, done := filepath.Join(ctl, "go"), filepath.Join(ctl, "done")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf(
		`while [ ! -e %s ]; do sleep 0.05; done; printf 'E2\n' > e; touch -m -r ref e; touch %s; sleep 30`, trigger, done))
	cmd.Dir = proj
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	m := &Mount{t: t, Dir: proj, Store: filepath.Join(t.TempDir(), "store"), env: testEnv(t)}
	t.Cleanup(m.cleanup)
	if r := m.Run("mount", m.Dir, "--store", m.Store); r.Code != 0 {
		t.Fatalf("mount: exit %d: %s", r.Code, r.Stderr)
	}
	m.pid = m.Pid()
	writeFile(t, filepath.Join(proj, "e"), []byte("mount-e\n"), 0o644)
	time.Sleep(1200 * time.Millisecond) // past the slack: the ctime alone tells
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
	r := m.Run("unmount", m.Dir, "--store", m.Store)
	if isMounted(m.Dir) {
		t.Fatalf("unmount: exit %d: %s; still mounted", r.Code, r.Stderr)
	}
	m.waitDaemonGone()
	if !strings.Contains(r.Stderr+"\n", "\nreynfs: kept e\n") {
		t.Errorf("unmount does not report e as kept: exit %d: %q", r.Code, r.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(proj, "e")); err != nil || string(b) != "E2\n" {
		t.Fatalf("e = %q (%v), want the write underneath %q", b, err, "E2\n")
	}

	// Mounted again with nothing changed, past the slack: nothing kept.
	m.Mount()
	time.Sleep(1200 * time.Millisecond)
	r = m.Run("unmount", m.Dir, "--store", m.Store)
	if r.Code != 0 || strings.Contains(r.Stderr, "kept") {
		t.Fatalf("unmount with nothing changed: exit %d: %q", r.Code, r.Stderr)
	}
	m.waitDaemonGone()

	// After a clean write-back recorded its time, the mount's own
	// changes are still written back.
	m.Mount()
	writeFile(t, filepath.Join(proj, "g"), []byte("mount-g\n"), 0o644)
	time.Sleep(1200 * time.Millisecond)
	r = m.Run("unmount", m.Dir, "--store", m.Store)
	if r.Code != 0 {
		t.Fatalf("unmount: exit %d: %q", r.Code, r.Stderr)
	}
	m.waitDaemonGone()
	if b, err := os.ReadFile(filepath.Join(proj, "g")); err != nil || string(b) != "mount-g\n" {
		t.Errorf("g = %q (%v), want the mount's %q", b, err, "mount-g\n")
	}
}
