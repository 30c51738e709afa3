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

// tmuxPane is the real reynfs binary running in a tmux pane of a tmux
// server of its own (-L), so that the test types keys into a terminal and
// reads the screen as a person would, and kills only its own server.
type tmuxPane struct {
	t    testing.TB
	sock string
}

// startTmux runs argv (with env) in a detached 120x40 tmux session; the
// server is killed when the test ends.
func startTmux(t testing.TB, env []string, argv ...string) *tmuxPane {
	t.Helper()
	requireTool(t, "tmux")
	p := &tmuxPane{t: t, sock: fmt.Sprintf("reynfs-test-%d-%d", os.Getpid(), time.Now().UnixNano())}
	t.Cleanup(func() { _ = p.tmux("kill-server") })
	cmd := append([]string{"new-session", "-d", "-s", "tl", "-x", "120", "-y", "40", "--", "env"}, env...)
	if err := p.tmux(append(cmd, argv...)...); err != nil {
		t.Fatalf("tmux new-session: %v", err)
	}
	return p
}

func (p *tmuxPane) tmux(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "tmux", append([]string{"-L", p.sock}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// keys types into the pane (tmux key names: Enter, Left, j…).
func (p *tmuxPane) keys(keys ...string) {
	p.t.Helper()
	if err := p.tmux(append([]string{"send-keys", "-t", "tl"}, keys...)...); err != nil {
		p.t.Fatal(err)
	}
}

func (p *tmuxPane) screen() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "tmux", "-L", p.sock, "capture-pane", "-p", "-t", "tl").Output()
	return string(out)
}

// waitFor waits until the screen shows every one of want.
func (p *tmuxPane) waitFor(what string, want ...string) string {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := p.screen()
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(s, w)
		}
		if ok {
			return s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: the screen never showed %q:\n%s", what, want, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTimelineRewindAndUndo: in tmux, 'reynfs timeline' opens on
// (current); two rows down shows what a rewind to that point would
// change; Enter opens the confirm screen on never mind; choosing rewind
// rewinds the workspace; u brings the abandoned state back; restoring
// only the path under the side pane's cursor changes that path alone; q
// quits.
func TestTimelineRewindAndUndo(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.txt"), []byte("v1\n"), 0o644)
	m := mountProject(t, dir)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(m.Dir, name))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	rwCheckpoint(t, m, "first")
	writeFile(t, filepath.Join(m.Dir, "a.txt"), []byte("v2\n"), 0o644)
	// As the claude hook saves it at a prompt: the row names the agent
	// and its session, the confirm screen how to resume it.
	state := filepath.Join(t.TempDir(), "state.json")
	writeFile(t, state, []byte(`{"tool":"claude","session_id":"0123456789abcdef"}`), 0o644)
	if r := m.Run("agent", "save", "claude", state, "--store", m.Store); r.Code != 0 {
		t.Fatalf("reynfs agent save: exit %d: %s", r.Code, r.Stderr)
	}
	second := rwCheckpoint(t, m, "second")
	writeFile(t, filepath.Join(m.Dir, "a.txt"), []byte("v3\n"), 0o644)
	writeFile(t, filepath.Join(m.Dir, "c.txt"), []byte("c\n"), 0o644)
	rwCheckpoint(t, m, "third")

	env := append([]string{"NO_COLOR=1"}, xdgOf(m)...)
	p := startTmux(t, env, reynfsBin, "timeline", "--dir", m.Dir, "--store", m.Store)
	p.waitFor("open", "(current)", "third", "second", "first", "a rewind here changes nothing", "claude/01234567")

	p.keys("j", "j")
	s := p.waitFor("two rows down", fmt.Sprintf("(seq %d) would:", second), "M a.txt", "D c.txt")
	if strings.Contains(s, "./") || strings.Contains(s, "a rewind here changes nothing") {
		t.Fatalf("side pane not on second:\n%s", s)
	}

	p.keys("Enter")
	p.waitFor("confirm", "Rewind the whole workspace to", `"second"`, "2 paths: 0 added back, 1 changed, 1 removed", "not reverted", "[ never mind ]",
		"agent claude: resume its conversation with: claude --resume 0123456789abcdef")
	if got := read("a.txt"); got != "v3\n" {
		t.Fatalf("a.txt changed before confirming: %q", got)
	}
	p.keys("Left", "Enter") // never mind -> rewind
	p.waitFor("rewound", "rewound to seq")
	if a, c := read("a.txt"), read("c.txt"); a != "v2\n" || !strings.Contains(c, "no such file") {
		t.Fatalf("after the rewind: a.txt %q, c.txt %q", a, c)
	}

	p.keys("u")
	p.waitFor("undo", "undid rewind ")
	if a, c := read("a.txt"), read("c.txt"); a != "v3\n" || c != "c\n" {
		t.Fatalf("after u: a.txt %q, c.txt %q", a, c)
	}
	// Both moves are operations, in the op log.
	if r := m.Run("op", "log", "--store", m.Store); r.Code != 0 || !strings.Contains(r.Stdout, "rewind") || !strings.Contains(r.Stdout, "undo") {
		t.Fatalf("reynfs op log after the rewind and u: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// Restore only the file under the side pane's cursor: a.txt from
	// "second", found with the filter, while c.txt (not restored) stays.
	p.keys("/", "second", "Enter", "j", "Tab")
	p.waitFor("side pane", fmt.Sprintf("(seq %d) would:", second), "M a.txt", "D c.txt")
	p.keys("Enter")
	p.waitFor("confirm restore", "[ restore only a.txt ]")
	p.keys("Left", "Enter")
	p.waitFor("restored", "restored a.txt")
	if a, c := read("a.txt"), read("c.txt"); a != "v2\n" || c != "c\n" {
		t.Fatalf("after restoring a.txt: a.txt %q, c.txt %q", a, c)
	}
	p.keys("q")
	deadline := time.Now().Add(5 * time.Second)
	for p.tmux("has-session", "-t", "tl") == nil {
		if time.Now().After(deadline) {
			t.Fatalf("q did not end reynfs timeline:\n%s", p.screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// xdgOf is the mount's XDG_DATA_HOME setting, for a command run outside
// Mount.Run.
func xdgOf(m *Mount) []string {
	for _, kv := range m.env {
		if strings.HasPrefix(kv, "XDG_DATA_HOME=") {
			return []string{kv}
		}
	}
	return nil
}

// TestTimelineNeedsTerminal: without a terminal (a script, CI) the picker
// exits 2 with one line, and rewind -i takes no target; rewind without
// -i still needs one.
func TestTimelineNeedsTerminal(t *testing.T) {
	env := testEnv(t)
	for _, args := range [][]string{{"timeline"}, {"rewind", "-i"}, {"rewind", "-i", "g2"}, {"rewind"}, {"timeline", "g2"}} {
		r := runReynfs(env, args...)
		lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
		if r.Code != 2 || len(lines) != 1 || r.Stdout != "" {
			t.Errorf("reynfs %s: exit %d, stdout %q, stderr %q; want exit 2 and one line", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
		}
	}
	if r := runReynfs(env, "timeline"); !strings.Contains(r.Stderr, "needs a terminal") {
		t.Errorf("reynfs timeline without a terminal: %q", r.Stderr)
	}
}
