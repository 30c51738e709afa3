package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// mountDebug mounts dir like mountProject, with --debug: the daemon logs
// every FUSE request, so a test can count the requests an operation cost.
func mountDebug(t *testing.T, dir string) *Mount {
	t.Helper()
	requireFUSE(t)
	m := &Mount{t: t, Dir: dir, Store: filepath.Join(t.TempDir(), "store"), env: testEnv(t)}
	t.Cleanup(m.cleanup)
	if r := m.Run("mount", m.Dir, "--store", m.Store, "--debug"); r.Code != 0 {
		t.Fatalf("reynfs mount --debug: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	if !isMounted(m.Dir) {
		t.Fatalf("reynfs mount --debug exited 0 but %s is not mounted", m.Dir)
	}
	m.pid = m.Pid()
	return m
}

var flushRequest = regexp.MustCompile(`rx \d+: FLUSH `)

// flushes counts the FLUSH requests the daemon has received so far.
func flushes(m *Mount) int { return len(flushRequest.FindAllString(m.Log(), -1)) }

// TestReadOnlyCloseNoFlush: closing a read-only descriptor costs no FLUSH
// round trip (FOPEN_NOFLUSH); git add, builds and greps open most files
// read-only. A writer's close still flushes, and what it buffered is
// readable through a read-only descriptor opened and closed meanwhile,
// and is in the file after the writer's close and after the unmount.
func TestReadOnlyCloseNoFlush(t *testing.T) {
	m := mountDebug(t, t.TempDir())
	p := filepath.Join(m.Dir, "f")
	if err := os.WriteFile(p, []byte("first"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := flushes(m)
	for range 20 {
		if b, err := os.ReadFile(p); err != nil || string(b) != "first" {
			t.Fatalf("read-only read: %q, %v", b, err)
		}
	}
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString(" second"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "first second" {
		t.Fatalf("read-only read of buffered data: %q, %v", b, err)
	}
	if got := flushes(m) - before; got != 0 {
		t.Fatalf("21 closes of read-only descriptors sent %d FLUSH requests, want 0", got)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("writer's close: %v", err)
	}
	if got := flushes(m) - before; got != 1 {
		t.Fatalf("the writer's close sent %d FLUSH requests, want 1", got)
	}
	m.Unmount()
	if b, err := os.ReadFile(p); err != nil || string(b) != "first second" {
		t.Fatalf("written back: %q, %v", b, err)
	}
}
