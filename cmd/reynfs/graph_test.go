package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/rewind"
)

func TestGraphLines(t *testing.T) {
	// g1 import; g2 "one"; g3 "two" abandoned by a rewind to g2, whose
	// generation is g4; g5 "three" on the branch of a branch (forked
	// from g3) and g7 "four" forked from g3 later, both abandoned; the
	// current state is past g6.
	gen := func(id int, seq, parent uint64, active bool, label string) api.LogEntry {
		return api.LogEntry{ID: id, Seq: seq, Parent: parent, Active: active, Label: label, Kind: "manual"}
	}
	l := &api.LogResult{Head: 30, Gens: []api.LogEntry{
		gen(7, 27, 12, false, "four"),
		gen(6, 25, 8, true, "rewind to 8"),
		gen(5, 20, 12, false, "three"),
		gen(4, 15, 8, false, "rewind to 8"),
		gen(3, 12, 8, false, "two"),
		gen(2, 8, 2, true, "one"),
		gen(1, 2, 0, true, "import"),
	}}
	bs := []rewind.Branch{{Name: "b-21", Names: []string{"feature"}, Tip: 21, Gen: 5}, {Name: "b-16", Tip: 16, Gen: 4}}
	got := graphLines(l, bs)
	strip := regexp.MustCompile(`seq \d+ +\S+ +\S+ \S+  \+0 ~0 -0 `)
	for i := range got {
		got[i] = strip.ReplaceAllString(got[i], "")
	}
	want := []string{
		`@  g6    "rewind to 8"  (head seq 30)`,
		`│ ○  g7    "four"`,
		`│ │ ○  g5    "three"  [b-21 feature (tip seq 21)]`,
		`│ ├─╯`,
		`│ ○  g3    "two"`,
		`├─╯`,
		`│ ○  g4    "rewind to 8"  [b-16 (tip seq 16)]`,
		`├─╯`,
		`○  g2    "one"`,
		`○  g1    "import"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("graph:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
