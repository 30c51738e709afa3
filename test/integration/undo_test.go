package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Undo, redo and the op log (issue 10 item 2), and the naming rule for
// checkpoint labels (item 3), through the real binary on a real mount.

// udContent reads a file of the mount, "(absent)" when it is not there.
func udContent(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "(absent)"
	}
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

// udExpect checks files of the mount against want (name -> content).
func udExpect(t testing.TB, m *Mount, when string, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if got := udContent(t, filepath.Join(m.Dir, name)); got != w {
			t.Fatalf("%s: %s is %q, want %q", when, name, got, w)
		}
	}
}

// udRun runs reynfs with --store and fails the test unless it exits 0.
func udRun(t testing.TB, m *Mount, args ...string) string {
	t.Helper()
	r := m.Run(append(args, "--store", m.Store)...)
	if r.Code != 0 {
		t.Fatalf("reynfs %s: exit %d: %s%s\nlog:\n%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr, m.LogTail(10))
	}
	return r.Stdout
}

// udRefused runs reynfs and checks it exits 2 with one line on stderr.
func udRefused(t testing.TB, m *Mount, args ...string) {
	t.Helper()
	r := m.Run(append(args, "--store", m.Store)...)
	if r.Code != 2 || strings.Count(strings.TrimRight(r.Stderr, "\n"), "\n") != 0 || r.Stderr == "" {
		t.Errorf("reynfs %q: exit %d, stderr %q; want exit 2 and one line", args, r.Code, r.Stderr)
	}
}

type udOp struct {
	ID     uint64 `json:"id"`
	Kind   string `json:"kind"`
	From   uint64 `json:"from_seq"`
	To     uint64 `json:"to_seq"`
	Of     uint64 `json:"of"`
	Branch string `json:"branch"`
	Undone bool   `json:"undone"`
}

type udOpLog struct {
	Ops  []udOp `json:"ops"`
	Undo uint64 `json:"undo"`
	Redo uint64 `json:"redo"`
}

func udOps(t testing.TB, m *Mount) udOpLog {
	t.Helper()
	var l udOpLog
	out := udRun(t, m, "op", "log", "--json")
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("reynfs op log --json: %v: %q", err, out)
	}
	return l
}

func udKinds(l udOpLog) string {
	var ks []string
	for _, op := range l.Ops {
		ks = append(ks, op.Kind)
	}
	return strings.Join(ks, ",")
}

func TestUndoRedo(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("1"), 0o644)
	m := mountProject(t, dir)
	writeFile(t, filepath.Join(m.Dir, "a"), []byte("2"), 0o644)
	udRun(t, m, "checkpoint", "-m", "one")
	writeFile(t, filepath.Join(m.Dir, "a"), []byte("3"), 0o644)
	writeFile(t, filepath.Join(m.Dir, "b"), []byte("new"), 0o644)
	udRun(t, m, "checkpoint", "-m", "two")
	future := map[string]string{"a": "3", "b": "new"}
	past := map[string]string{"a": "2", "b": "(absent)"}

	udRefused(t, m, "redo") // nothing undone yet
	udRun(t, m, "rewind", "one")
	udExpect(t, m, "after rewind one", past)
	udRun(t, m, "undo")
	udExpect(t, m, "after undo of the rewind", future)
	udRun(t, m, "redo")
	udExpect(t, m, "after redo", past)

	l := udOps(t, m)
	if got := udKinds(l); got != "rewind,undo,redo" {
		t.Fatalf("op log kinds %q, want rewind,undo,redo", got)
	}
	rw := l.Ops[0]
	if l.Ops[1].Of != rw.ID || l.Ops[2].Of != rw.ID || l.Undo != rw.ID || l.Redo != 0 {
		t.Errorf("op log %+v: undo and redo should name the rewind %d, undo next the rewind", l, rw.ID)
	}
	if l.Ops[1].To != rw.ID-1 {
		t.Errorf("undo went to seq %d, want %d (just before the rewind's reset record)", l.Ops[1].To, rw.ID-1)
	}

	// A restore is an operation too: undo walks back over it, then over
	// the rewind; with nothing left, undo refuses and writes nothing.
	writeFile(t, filepath.Join(m.Dir, "a"), []byte("edited"), 0o644)
	if r := m.Run("restore", filepath.Join(m.Dir, "a"), "--from", "two"); r.Code != 0 {
		t.Fatalf("reynfs restore: exit %d: %s", r.Code, r.Stderr)
	}
	udExpect(t, m, "after restore", map[string]string{"a": "3", "b": "(absent)"})
	udRun(t, m, "undo")
	udExpect(t, m, "after undo of the restore", map[string]string{"a": "edited", "b": "(absent)"})
	udRun(t, m, "undo")
	udExpect(t, m, "after undo of the rewind", future)
	head := rwHead(t, m)
	udRefused(t, m, "undo")
	if h := rwHead(t, m); h != head {
		t.Errorf("a refused undo moved head from %d to %d", head, h)
	}
	udRun(t, m, "redo") // to the state just before the undo: with the restore undone
	udExpect(t, m, "after redo of the rewind", map[string]string{"a": "edited", "b": "(absent)"})
	before := udOps(t, m)
	if got := udKinds(before); got != "rewind,undo,redo,restore,undo,undo,redo" {
		t.Errorf("op log kinds %q", got)
	}

	// The op log is in the journal: the same unmounted and after a remount.
	m.Unmount()
	if got := udKinds(udOps(t, m)); got != udKinds(before) {
		t.Errorf("op log of the unmounted store %q, want %q", got, udKinds(before))
	}
	m.Mount()
	after := udOps(t, m)
	if udKinds(after) != udKinds(before) || after.Undo != before.Undo || after.Redo != before.Redo {
		t.Errorf("op log after a remount %+v, want %+v", after, before)
	}
	udRun(t, m, "redo") // the restore, redone after the remount
	udExpect(t, m, "after redo of the restore", map[string]string{"a": "3"})
}

// TestCheckpointLabelRule is the acceptance line of issue 10 item 3:
// labels that read as targets, duplicates, empty, multi-line and
// over-long labels are refused with exit 2 and one line, and nothing is
// written.
func TestCheckpointLabelRule(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("1"), 0o644)
	m := mountProject(t, dir)
	udRun(t, m, "checkpoint", "-m", "kept")
	head := rwHead(t, m)
	for _, label := range []string{"5", "g2", "-1", "~1", "", "kept", "@", "b-3", "two\nlines", strings.Repeat("x", 201)} {
		udRefused(t, m, "checkpoint", "-m", label)
	}
	// The refusal names the label as it was typed (it once said "~1",
	// the spelling the CLI gives a target -1).
	if r := m.Run("checkpoint", "-m", "-1", "--store", m.Store); r.Code != 2 || !strings.Contains(r.Stderr, `"-1"`) {
		t.Errorf("checkpoint -m -1: exit %d, stderr %q; want exit 2 naming \"-1\"", r.Code, r.Stderr)
	}
	udRefused(t, m, "branch", "kept")
	udRefused(t, m, "branch", "g7")
	if h := rwHead(t, m); h != head {
		t.Errorf("refused checkpoints moved head from %d to %d", head, h)
	}
	udRun(t, m, "checkpoint", "-m", "kept 2")
	udRun(t, m, "checkpoint") // no label at all is fine
}
