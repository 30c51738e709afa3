package timeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/reynfs/reynfs/agents/api"
)

// fakeSource is a Source in memory: it records the changes asked of it.
type fakeSource struct {
	head     uint64
	active   []Point // newest first
	branches []Point
	changes  map[uint64][]Change
	runs     []api.RunInfo
	calls    []string
}

func (f *fakeSource) Points(_ context.Context, all bool) (uint64, []Point, error) {
	f.calls = append(f.calls, fmt.Sprintf("points all=%v", all))
	pts := append([]Point(nil), f.active...)
	if all {
		pts = append(pts, f.branches...)
	}
	return f.head, pts, nil
}

func (f *fakeSource) Changes(_ context.Context, seq uint64) ([]Change, error) {
	f.calls = append(f.calls, fmt.Sprintf("changes %d", seq))
	return f.changes[seq], nil
}

func (f *fakeSource) FileDiff(_ context.Context, seq uint64, path string) (string, error) {
	f.calls = append(f.calls, fmt.Sprintf("filediff %d %s", seq, path))
	return "--- a/" + path + "\n+++ b/" + path + "\n@@ -1 +1 @@\n-new\n+old\n", nil
}

func (f *fakeSource) Runs(context.Context) ([]api.RunInfo, error) { return f.runs, nil }

func (f *fakeSource) Resume(_ context.Context, seq uint64) []string {
	return []string{"agent claude: resume its conversation with: claude --resume s1 --fork-session"}
}

func (f *fakeSource) Rewind(_ context.Context, seq uint64) (string, error) {
	f.calls = append(f.calls, fmt.Sprintf("rewind %d", seq))
	return fmt.Sprintf("rewound to seq %d", seq), nil
}

func (f *fakeSource) Restore(_ context.Context, path string, seq uint64) (string, error) {
	f.calls = append(f.calls, fmt.Sprintf("restore %s %d", path, seq))
	return "restored " + path, nil
}

func (f *fakeSource) Undo(context.Context) (string, error) {
	f.calls = append(f.calls, "undo")
	return "", errors.New("undo: no rewind to undo")
}

var t0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

func newFake() *fakeSource {
	return &fakeSource{
		head: 40,
		active: []Point{
			{ID: 4, Seq: 30, Kind: "turn", Label: "add the parser", Time: t0.Add(-2 * time.Minute), Active: true, Parent: 20, Added: 1, Agent: "claude"},
			{ID: 3, Seq: 20, Kind: "manual", Label: "before refactor", Time: t0.Add(-3 * time.Hour), Active: true, Parent: 10, Modified: 2},
			{ID: 1, Seq: 10, Kind: "import", Label: "", Time: t0.Add(-50 * time.Hour), Active: true},
		},
		branches: []Point{
			{ID: 2, Seq: 15, Kind: "turn", Label: "abandoned idea", Time: t0.Add(-4 * time.Hour), Parent: 10, Removed: 1},
		},
		changes: map[uint64][]Change{
			30: {{Path: "parser.go", Kind: "removed"}},
			20: {{Path: "main.go", Kind: "modified"}, {Path: "parser.go", Kind: "removed"}},
			10: {{Path: "main.go", Kind: "modified"}},
			15: {{Path: "idea.txt", Kind: "added"}},
		},
	}
}

// drive runs the I/O a command asks for, feeding its answers back, the
// way the program would (commands of bubbles' own are not run).
func drive(t *testing.T, m Model, cmd tea.Cmd) (Model, bool) {
	t.Helper()
	quit := false
	queue := []tea.Cmd{cmd}
	for n := 0; len(queue) > 0; n++ {
		if n > 100 {
			t.Fatal("commands never settle")
		}
		c := queue[0]
		queue = queue[1:]
		if c == nil {
			continue
		}
		switch msg := c().(type) {
		case tea.BatchMsg:
			queue = append(queue, msg...)
		case tea.QuitMsg:
			quit = true
		case pointsMsg, changesMsg, fileDiffMsg, confirmMsg, doneMsg:
			next, more := m.Update(msg)
			m = next.(Model)
			queue = append(queue, more)
		}
	}
	return m, quit
}

func start(t *testing.T, f *fakeSource, w, h int) Model {
	t.Helper()
	m := New(context.Background(), f, false, func() time.Time { return t0 })
	next, _ := m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	m, _ = drive(t, next.(Model), m.Init())
	return m
}

// press sends keys ("enter", "j", "/"…) one by one.
func press(t *testing.T, m Model, keys ...string) (Model, bool) {
	t.Helper()
	quit := false
	for _, k := range keys {
		next, cmd := m.Update(keyMsg(k))
		var q bool
		m, q = drive(t, next.(Model), cmd)
		quit = quit || q
	}
	return m, quit
}

func keyMsg(k string) tea.KeyPressMsg {
	switch k {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "right":
		return tea.KeyPressMsg{Code: tea.KeyRight}
	case "left":
		return tea.KeyPressMsg{Code: tea.KeyLeft}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	}
	r := []rune(k)[0]
	return tea.KeyPressMsg{Code: r, Text: k}
}

func screen(m Model) string { return ansi.Strip(m.View().Content) }

// selectedLine is the list row under the cursor, as drawn.
func selectedLine(t *testing.T, m Model) string {
	t.Helper()
	r, ok := m.selected()
	if !ok {
		t.Fatal("no row selected")
	}
	if r.current {
		return "(current)"
	}
	return fmt.Sprintf("g%d", r.pt.ID)
}

func TestOpensOnCurrent(t *testing.T) {
	f := newFake()
	m := start(t, f, 120, 30)
	if got := selectedLine(t, m); got != "(current)" {
		t.Fatalf("opened on %s, want (current)", got)
	}
	s := screen(m)
	for _, want := range []string{"@", "(current)", "g4", "turn", "2m", "add the parser", "+1 ~0 -0", "claude", "g3", "3h", "g1", "2d", "a rewind here changes nothing"} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "abandoned idea") {
		t.Errorf("abandoned branch shown without a:\n%s", s)
	}
}

func TestEnterOnCurrentDoesNothing(t *testing.T) {
	f := newFake()
	m := start(t, f, 120, 30)
	m, quit := press(t, m, "enter", "enter")
	if quit || m.mode != modeList {
		t.Fatalf("Enter on (current): mode %d quit %v", m.mode, quit)
	}
	for _, c := range f.calls {
		if strings.HasPrefix(c, "rewind") || strings.HasPrefix(c, "restore") {
			t.Fatalf("Enter on (current) called %s", c)
		}
	}
}

func TestMoveShowsDiffPane(t *testing.T) {
	f := newFake()
	m := start(t, f, 120, 30)
	m, _ = press(t, m, "j", "down")
	if got := selectedLine(t, m); got != "g3" {
		t.Fatalf("two rows down: on %s, want g3", got)
	}
	s := screen(m)
	if !strings.Contains(s, "rewinding to g3 (seq 20) would:") || !strings.Contains(s, "M main.go") || !strings.Contains(s, "D parser.go") {
		t.Fatalf("side pane of g3 missing:\n%s", s)
	}
	m, _ = press(t, m, "k")
	if got := selectedLine(t, m); got != "g4" {
		t.Fatalf("up: on %s, want g4", got)
	}
	m, _ = press(t, m, "G")
	if got := selectedLine(t, m); got != "g1" {
		t.Fatalf("G: on %s, want g1", got)
	}
	m, _ = press(t, m, "g")
	if got := selectedLine(t, m); got != "(current)" {
		t.Fatalf("g: on %s, want (current)", got)
	}
	m, _ = press(t, m, "up", "k")
	if got := selectedLine(t, m); got != "(current)" {
		t.Fatalf("up past the top: on %s", got)
	}
}

func TestConfirmDefaultsToNeverMind(t *testing.T) {
	f := newFake()
	f.runs = []api.RunInfo{{ID: "r7", Pid: 4242, Agent: "coder", OnRewind: "kill", State: "running"}}
	m := start(t, f, 120, 30)
	m, _ = press(t, m, "j", "j", "enter")
	if m.mode != modeConfirm || m.choice != choiceNever {
		t.Fatalf("Enter on g3: mode %d choice %d, want the confirm screen on never mind", m.mode, m.choice)
	}
	s := screen(m)
	for _, want := range []string{"Rewind the whole workspace to g3 (seq 20)?", "before refactor", "3h ago",
		"2 paths: 0 added back, 1 changed, 1 removed", "would cancel (kill) run r7 (pid 4242, agent coder)",
		"not reverted: running processes and their memory, network requests, files outside the mount",
		"claude --resume s1", "[ rewind ]", "[ never mind ]"} {
		if !strings.Contains(s, want) {
			t.Errorf("confirm screen lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "restore only") {
		t.Errorf("restore offered with no path under the cursor:\n%s", s)
	}
	m, _ = press(t, m, "enter") // never mind
	if m.mode != modeList {
		t.Fatalf("never mind: mode %d", m.mode)
	}
	for _, c := range f.calls {
		if strings.HasPrefix(c, "rewind") {
			t.Fatalf("never mind rewound: %v", f.calls)
		}
	}
	// Now choose rewind: one step left of never mind (restore is skipped).
	m, _ = press(t, m, "enter", "left", "enter")
	if !contains(f.calls, "rewind 20") {
		t.Fatalf("rewind not called: %v", f.calls)
	}
	if !strings.Contains(screen(m), "rewound to seq 20") || selectedLine(t, m) != "(current)" {
		t.Fatalf("after the rewind:\n%s", screen(m))
	}
}

func TestRestoreOnlyThisPath(t *testing.T) {
	f := newFake()
	m := start(t, f, 120, 30)
	m, _ = press(t, m, "j", "j", "tab", "j") // g3, side pane, parser.go
	m, _ = press(t, m, "enter")
	if !strings.Contains(screen(m), "[ restore only parser.go ]") {
		t.Fatalf("no restore choice:\n%s", screen(m))
	}
	m, _ = press(t, m, "left", "enter")
	if !contains(f.calls, "restore parser.go 20") {
		t.Fatalf("restore not called: %v", f.calls)
	}
	_ = m
}

func TestEscLeavesConfirm(t *testing.T) {
	f := newFake()
	m := start(t, f, 120, 30)
	m, quit := press(t, m, "j", "enter", "right", "esc")
	if quit || m.mode != modeList {
		t.Fatalf("esc in confirm: mode %d quit %v", m.mode, quit)
	}
	_, quit = press(t, m, "q")
	if !quit {
		t.Fatal("q does not quit")
	}
}

func TestFileDiff(t *testing.T) {
	f := newFake()
	m := start(t, f, 120, 30)
	m, _ = press(t, m, "j", "d")
	if m.mode != modeDiff || !contains(f.calls, "filediff 30 parser.go") {
		t.Fatalf("d: mode %d calls %v", m.mode, f.calls)
	}
	if s := screen(m); !strings.Contains(s, "+++ b/parser.go") || !strings.Contains(s, "+old") {
		t.Fatalf("diff screen:\n%s", s)
	}
	m, _ = press(t, m, "esc")
	if m.mode != modeList {
		t.Fatalf("esc from diff: mode %d", m.mode)
	}
}

func TestFilter(t *testing.T) {
	f := newFake()
	m := start(t, f, 120, 30)
	m, _ = press(t, m, "/", "b", "f", "r")
	if !m.editing {
		t.Fatal("/ does not start the filter")
	}
	s := screen(m)
	if !strings.Contains(s, "before refactor") || strings.Contains(s, "add the parser") {
		t.Fatalf("filter bfr:\n%s", s)
	}
	if !strings.Contains(s, "(current)") {
		t.Fatalf("filter hid (current):\n%s", s)
	}
	// q while typing is text, not quit.
	m, quit := press(t, m, "q")
	if quit || m.filter.Value() != "bfrq" {
		t.Fatalf("q in the filter: quit %v value %q", quit, m.filter.Value())
	}
	m, _ = press(t, m, "backspace", "enter", "j")
	if got := selectedLine(t, m); got != "g3" {
		t.Fatalf("first match: on %s", got)
	}
	m, quit = press(t, m, "esc")
	if quit || m.filter.Value() != "" || !strings.Contains(screen(m), "add the parser") {
		t.Fatalf("esc does not clear the filter first: quit %v\n%s", quit, screen(m))
	}
	if got := selectedLine(t, m); got != "g3" {
		t.Fatalf("cursor left its point when the filter cleared: %s", got)
	}
}

func TestAllBranches(t *testing.T) {
	f := newFake()
	m := start(t, f, 120, 30)
	m, _ = press(t, m, "a")
	s := screen(m)
	if !strings.Contains(s, "abandoned idea") || !strings.Contains(s, "all branches") {
		t.Fatalf("a: no branch:\n%s", s)
	}
	// The branch forked from g1: it is drawn under g1, indented.
	lines := strings.Split(s, "\n")
	var g1, g2 int
	for i, l := range lines {
		if strings.Contains(l, " g1 ") {
			g1 = i
		}
		if strings.Contains(l, " g2 ") {
			g2 = i
			if !strings.Contains(l, "╰○  g2") {
				t.Errorf("abandoned row not indented: %q", l)
			}
		}
	}
	if g2 != g1+1 {
		t.Fatalf("branch row %d not right under its fork g1 at %d:\n%s", g2, g1, s)
	}
}

func TestUndo(t *testing.T) {
	f := newFake()
	m := start(t, f, 120, 30)
	m, _ = press(t, m, "u")
	if !contains(f.calls, "undo") || !strings.Contains(screen(m), "error: undo: no rewind to undo") {
		t.Fatalf("u: calls %v\n%s", f.calls, screen(m))
	}
}

func TestHelp(t *testing.T) {
	f := newFake()
	m := start(t, f, 120, 30)
	m, _ = press(t, m, "?")
	s := screen(m)
	if m.mode != modeHelp || !strings.Contains(s, "undo last rewind") || !strings.Contains(s, "all branches") {
		t.Fatalf("? help:\n%s", s)
	}
	m, quit := press(t, m, "q")
	if quit || m.mode != modeList {
		t.Fatalf("a key after help: quit %v mode %d", quit, m.mode)
	}
}

func TestTinyTerminal(t *testing.T) {
	f := newFake()
	for _, size := range [][2]int{{0, 0}, {10, 3}, {30, 6}, {50, 12}, {200, 60}} {
		m := start(t, f, size[0], size[1])
		m, _ = press(t, m, "j", "tab", "j", "tab", "enter")
		s := m.View().Content
		lines := strings.Split(s, "\n")
		if len(lines) > max(1, size[1]) {
			t.Errorf("%dx%d: %d lines", size[0], size[1], len(lines))
		}
		for _, l := range lines {
			if w := ansi.StringWidth(l); w > size[0] {
				t.Errorf("%dx%d: line of %d cells: %q", size[0], size[1], w, l)
			}
		}
	}
	m := start(t, f, 50, 12)
	if s := screen(m); !strings.Contains(s, "(current)") || strings.Contains(s, "│") {
		t.Fatalf("narrow terminal: want the list alone:\n%s", s)
	}
	m, _ = press(t, m, "j", "tab")
	if s := screen(m); !strings.Contains(s, "D parser.go") || strings.Contains(s, "(current)") {
		t.Fatalf("narrow terminal, Tab: want the side pane alone:\n%s", s)
	}
}

func TestNoColor(t *testing.T) {
	f := newFake()
	m := start(t, f, 120, 30)
	m, _ = press(t, m, "j", "j")
	if s := m.View().Content; strings.Contains(s, "\x1b[38;") || strings.Contains(s, "\x1b[48;") || strings.Contains(s, "\x1b[3") {
		t.Fatalf("colour without color: %q", s)
	}
	m.color = true
	if s := m.View().Content; !strings.Contains(s, "\x1b[") {
		t.Fatal("no styling with color")
	}
}

func TestRowsNesting(t *testing.T) {
	pts := []Point{
		{ID: 5, Seq: 50, Active: true, Parent: 10},
		{ID: 1, Seq: 10, Active: true},
		{ID: 4, Seq: 40, Parent: 20},             // a fork off the abandoned g2
		{ID: 3, Seq: 30, Parent: 20},             // continues g2
		{ID: 2, Seq: 20, Parent: 10},             // abandoned, forked from g1
		{ID: 6, Seq: 60, Parent: 99, Label: "x"}, // its fork is gone (gc)
	}
	rows := buildRows(pts, "")
	var got []string
	for _, r := range rows[1:] {
		got = append(got, fmt.Sprintf("g%d/%d", r.pt.ID, r.depth))
	}
	want := "g5/0 g1/0 g4/2 g3/1 g2/1 g6/1"
	if strings.Join(got, " ") != want {
		t.Fatalf("rows %v, want %s", got, want)
	}
}

func TestFuzzy(t *testing.T) {
	for _, c := range []struct {
		p, s string
		ok   bool
	}{{"bfr", "before refactor", true}, {"BEF", "before", true}, {"fb", "before", false},
		{"add pars", "add the parser", true}, {"", "x", true}, {"é", "café", true}, {"zz", "z", false}} {
		if got := fuzzy(c.p, c.s); got != c.ok {
			t.Errorf("fuzzy(%q, %q) = %v", c.p, c.s, got)
		}
	}
}

func TestFilePatch(t *testing.T) {
	patch := "--- a/x.go\n+++ b/x.go\n@@ -1 +1 @@\n-a\n+b\nBinary files a/img.png and b/img.png differ\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+n\n"
	if got := filePatch(patch, "x.go"); got != "--- a/x.go\n+++ b/x.go\n@@ -1 +1 @@\n-a\n+b\n" {
		t.Errorf("x.go: %q", got)
	}
	if got := filePatch(patch, "new.txt"); got != "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+n\n" {
		t.Errorf("new.txt: %q", got)
	}
	if got := filePatch(patch, "img.png"); got != "Binary files a/img.png and b/img.png differ\n" {
		t.Errorf("img.png: %q", got)
	}
	if got := filePatch(patch, "x"); got != "" {
		t.Errorf("x: %q", got)
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func TestStaleDiffIgnored(t *testing.T) {
	f := newFake()
	m := start(t, f, 120, 30)
	// A diff computed before a rewind arrives after it: it must not be shown.
	before := m.epoch
	m, _ = press(t, m, "j", "enter", "left", "enter") // rewind to g4
	next, _ := m.Update(changesMsg{epoch: before, seq: 20, list: []Change{{Path: "stale.go", Kind: "added"}}})
	m = next.(Model)
	m, _ = press(t, m, "j", "j")
	if s := screen(m); strings.Contains(s, "stale.go") || !strings.Contains(s, "D parser.go") {
		t.Fatalf("a diff from before the rewind is shown:\n%s", s)
	}
}

func TestScrollKeepsCursorShown(t *testing.T) {
	f := newFake()
	f.active = nil
	for i := 100; i >= 1; i-- {
		f.active = append(f.active, Point{ID: i, Seq: uint64(i * 10), Kind: "turn", Label: fmt.Sprintf("step %d", i), Time: t0, Active: true, Parent: uint64(i*10 - 10)})
	}
	m := start(t, f, 100, 12)
	m, _ = press(t, m, "G")
	if s := screen(m); !strings.Contains(s, "step 1 ") || strings.Contains(s, "step 100") {
		t.Fatalf("G: the oldest row is not shown:\n%s", s)
	}
	m, _ = press(t, m, "g", "j", "j")
	if s := screen(m); !strings.Contains(s, "(current)") || !strings.Contains(s, "step 99") {
		t.Fatalf("g: the newest rows are not shown:\n%s", s)
	}
	if got := selectedLine(t, m); got != "g99" {
		t.Fatalf("on %s, want g99", got)
	}
}
