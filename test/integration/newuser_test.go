package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// newuserRunIDs is the IDs 'reynfs runs --json' lists, oldest first.
func newuserRunIDs(t *testing.T, m *Mount) []string {
	t.Helper()
	r := m.Run("runs", "--json", "--dir", m.Dir)
	if r.Code != 0 {
		t.Fatalf("runs --json: exit %d: %s", r.Code, r.Stderr)
	}
	var res struct {
		Runs []struct {
			ID string `json:"id"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("runs --json: %v: %s", err, r.Stdout)
	}
	var ids []string
	for _, x := range res.Runs {
		ids = append(ids, x.ID)
	}
	return ids
}

// TestNewuserLogRunUnknown: 'reynfs log --run ID' with an ID no record
// and no run has (a typo, a prefix) is refused with exit 2; it printed
// an empty log, as if the run had changed nothing. A run that wrote
// nothing is still listed without error, and a real one shows its records.
func TestNewuserLogRunUnknown(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	m := mountProject(t, dir)

	if r := m.Run("run", "--dir", m.Dir, "--", "sh", "-c", "echo hi > "+filepath.Join(m.Dir, "r.txt")); r.Code != 0 {
		t.Fatalf("run: exit %d: %s", r.Code, r.Stderr)
	}
	if r := m.Run("run", "--dir", m.Dir, "--", "true"); r.Code != 0 {
		t.Fatalf("run true: exit %d: %s", r.Code, r.Stderr)
	}
	ids := newuserRunIDs(t, m)
	if len(ids) != 2 {
		t.Fatalf("runs: %q, want 2", ids)
	}
	var writer, idle string
	for _, id := range ids {
		r := m.Run("log", "--dir", m.Dir, "--run", id)
		if r.Code != 0 {
			t.Fatalf("log --run %s: exit %d: %s", id, r.Code, r.Stderr)
		}
		if strings.Contains(r.Stdout, "r.txt") {
			writer = id
		} else {
			idle = id
		}
	}
	if writer == "" || idle == "" {
		t.Fatalf("log --run: no run shows r.txt, or both do (runs %q)", ids)
	}
	for _, bad := range []string{"1", writer[:4], "nosuchrun"} {
		r := m.Run("log", "--dir", m.Dir, "--run", bad)
		if r.Code != 2 || !strings.Contains(r.Stderr, "no such run") || strings.Count(strings.TrimSpace(r.Stderr), "\n") > 0 {
			t.Errorf("log --run %s: exit %d, stdout %q, stderr %q; want exit 2 and one line 'no such run'", bad, r.Code, r.Stdout, r.Stderr)
		}
	}
}

// TestNewuserDeadDaemonSaysStale: with the daemon killed, checkpoint and
// runs said "no reynfs daemon is serving this store" (exit 5) where
// status and log say "daemon dead, mount stale" with the fix (exit 6);
// and unmount of a workspace not mounted now says so.
func TestNewuserDeadDaemonSaysStale(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	m := mountProject(t, dir)
	m.Kill9()
	for _, args := range [][]string{
		{"checkpoint", "--dir", m.Dir, "--store", m.Store},
		{"runs", "--dir", m.Dir, "--store", m.Store},
		{"status", m.Dir, "--store", m.Store},
	} {
		r := m.Run(args...)
		if r.Code != 6 || !strings.Contains(r.Stderr, "daemon dead, mount stale") || !strings.Contains(r.Stderr, "reynfs unmount") {
			t.Errorf("%q on a dead daemon: exit %d, stderr %q; want exit 6 'daemon dead, mount stale' and the fix", args, r.Code, r.Stderr)
		}
	}
	if r := m.Run("unmount", m.Dir, "--store", m.Store); r.Code != 0 {
		t.Fatalf("unmount of the stale mount: exit %d: %s", r.Code, r.Stderr)
	}
	r := m.Run("unmount", m.Dir, "--store", m.Store)
	if r.Code != 5 || !strings.Contains(r.Stderr, "store "+m.Store+" is not mounted") {
		t.Errorf("unmount again: exit %d, stderr %q; want exit 5 'the workspace of store %s is not mounted'", r.Code, r.Stderr, m.Store)
	}
}

// TestNewuserCheckoutLabel: 'reynfs checkout LABEL' (a label, gN or a
// seq, not a branch) said only 'no branch "LABEL" (see reynfs branch)';
// it now names the command that goes there. Nothing moves.
func TestNewuserCheckoutLabel(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	m := mountProject(t, dir)
	if r := m.Run("checkpoint", "--dir", m.Dir, "-m", "tests pass"); r.Code != 0 {
		t.Fatalf("checkpoint: exit %d: %s", r.Code, r.Stderr)
	}
	for target, want := range map[string]string{
		"tests pass": "to go there: reynfs rewind 'tests pass'",
		"g1":         "to go there: reynfs rewind g1",
		"nosuch":     "no branch \"nosuch\" (see 'reynfs branch')",
	} {
		r := m.Run("checkout", "--dir", m.Dir, target)
		if r.Code != 2 || !strings.Contains(r.Stderr, want) || strings.Count(strings.TrimSpace(r.Stderr), "\n") > 0 {
			t.Errorf("checkout %q: exit %d, stderr %q; want exit 2 and one line with %q", target, r.Code, r.Stderr, want)
		}
	}
	if r := m.Run("op", "log", "--dir", m.Dir); r.Code != 0 || strings.Contains(r.Stdout, "checkout") {
		t.Errorf("a refused checkout moved the workspace: op log exit %d:\n%s", r.Code, r.Stdout)
	}
}
