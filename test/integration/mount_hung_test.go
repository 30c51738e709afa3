package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMountOverHungDaemon: `reynfs mount` of a directory whose reynfs
// mount has a stopped daemon (SIGSTOP: its mount and its socket are there,
// nothing answers) is refused within seconds with one line that says the
// daemon is hung or stopped and names `reynfs unmount --store`; it used
// to hang in statfs on the mount. The mount is left alone; `reynfs
// unmount`, as the line says, aborts and detaches it, and the next mount
// serves what the daemon had acknowledged.
func TestMountOverHungDaemon(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	writeFile(t, filepath.Join(m.Dir, "w"), []byte("acknowledged"), 0o644)
	if r := m.Run("checkpoint", "--store", m.Store); r.Code != 0 {
		t.Fatalf("reynfs checkpoint: exit %d: %s", r.Code, r.Stderr)
	}
	pid := m.pid
	hcStop(t, pid)
	cmd := exec.Command(reynfsBin, "mount", m.Dir, "--store", m.Store)
	cmd.Env, cmd.Dir = m.env, "/"
	start := time.Now()
	r := hcRunCmd(t, cmd, 15*time.Second)
	what := "reynfs mount (daemon stopped)"
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("%s: took %s, want a few seconds", what, took.Round(time.Millisecond))
	}
	rwOneLine(t, r, 6, what)
	if !strings.Contains(r.Stderr, "hung or stopped") || !strings.Contains(r.Stderr, "reynfs unmount --store "+m.Store) {
		t.Errorf("%s: stderr %q; want it to say the daemon is hung or stopped and name 'reynfs unmount --store %s'", what, r.Stderr, m.Store)
	}
	if !isMounted(m.Dir) {
		t.Fatalf("%s: the stopped daemon's mount is gone", what)
	}
	// The hint holds: unmount, whose call on the socket times out (10 s),
	// aborts and detaches the stopped daemon's mount.
	unmountStoppedThenRemount(t, m, pid, 20*time.Second)
}
