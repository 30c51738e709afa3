package timeline

import (
	"strings"
	"testing"
)

// TestHostileNamesEscaped: a label from an old store (before the label
// rule), an agent name, a changed path and a diff line holding ESC
// sequences, C1 controls and a newline reach the screen escaped: the raw
// sequences (which would clear the terminal under the UI or forge a row)
// are never in the frame.
func TestHostileNamesEscaped(t *testing.T) {
	evil := "x\x1b[2J\x1b[H\nseq 1 forged\u009b1m"
	f := newFake()
	f.active[0].Label = "label " + evil
	f.active[0].Agent = "agent " + evil
	f.changes[30] = []Change{{Path: "path " + evil, Kind: "removed"}}
	m := start(t, f, 160, 30)
	m, _ = press(t, m, "j")
	check := func(what string, bads ...string) {
		t.Helper()
		raw := m.View().Content
		for _, bad := range bads {
			if strings.Contains(raw, bad) {
				t.Errorf("%s: the frame holds %q raw", what, bad)
			}
		}
		if !strings.Contains(screen(m), `\x1b[2J`) {
			t.Errorf("%s: the escaped name is not shown:\n%s", what, screen(m))
		}
	}
	check("list", "\x1b[2J", "\x1b[H", "\u009b", "\nseq 1 forged")
	// The fake's diff puts the path raw in its header (Patch quotes it),
	// so a newline there splits the line; the ESCs must still not pass.
	m, _ = press(t, m, "d")
	check("diff view", "\x1b[2J", "\x1b[H", "\u009b")
}
