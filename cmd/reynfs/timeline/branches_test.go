package timeline

import (
	"strings"
	"testing"
)

// TestAbandonedRowNamesBranch: with a, the abandoned point that is a
// branch's newest generation shows the branch's names (what checkout
// takes), and / finds it by them; rows of the current path show none.
func TestAbandonedRowNamesBranch(t *testing.T) {
	f := newFake()
	f.branches[0].Branches = []string{"b-17", "spike"}
	m := start(t, f, 120, 30)
	if s := screen(m); strings.Contains(s, "b-17") {
		t.Fatalf("branch names shown without a:\n%s", s)
	}
	m, _ = press(t, m, "a")
	s := screen(m)
	var line string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "abandoned idea") {
			line = l
		}
	}
	if !strings.Contains(line, "[b-17 spike] abandoned idea") {
		t.Fatalf("abandoned row %q; want its branch names before the label:\n%s", line, s)
	}
	if strings.Count(s, "b-17") != 1 {
		t.Errorf("branch name on more than its row:\n%s", s)
	}
	m, _ = press(t, m, "/", "s", "p", "k")
	s = screen(m)
	if !strings.Contains(s, "abandoned idea") || strings.Contains(s, "before refactor") {
		t.Errorf("filter 'spk': want only the row of the branch named spike:\n%s", s)
	}
}
