package integration

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Named branches (issue 10 item 3): a rewind leaves a branch b-TIP with
// its counts against the fork point; a name given to it survives a
// remount; checkout moves the workspace to its tip as an operation that
// undo reverts.

type brBranch struct {
	Name    string   `json:"name"`
	Names   []string `json:"names"`
	Tip     uint64   `json:"tip_seq"`
	Fork    uint64   `json:"fork_seq"`
	Reset   uint64   `json:"reset_seq"`
	Current bool     `json:"current"`
	Changed struct {
		Added    int `json:"added"`
		Modified int `json:"modified"`
		Removed  int `json:"removed"`
	} `json:"changed"`
}

func brList(t testing.TB, m *Mount) []brBranch {
	t.Helper()
	var bs []brBranch
	out := udRun(t, m, "branch", "--json")
	if err := json.Unmarshal([]byte(out), &bs); err != nil {
		t.Fatalf("reynfs branch --json: %v: %q", err, out)
	}
	return bs
}

func TestBranchCheckout(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("1"), 0o644)
	writeFile(t, filepath.Join(dir, "gone"), []byte("x"), 0o644)
	m := mountProject(t, dir)
	udRun(t, m, "checkpoint", "-m", "one")
	fork := rwHead(t, m)
	writeFile(t, filepath.Join(m.Dir, "a"), []byte("2"), 0o644)
	writeFile(t, filepath.Join(m.Dir, "b"), []byte("new"), 0o644)
	udRun(t, m, "checkpoint", "-m", "two")
	tip := rwHead(t, m)
	udRun(t, m, "rewind", "one")
	udExpect(t, m, "after rewind one", map[string]string{"a": "1", "b": "(absent)"})

	bs := brList(t, m)
	if len(bs) != 1 {
		t.Fatalf("reynfs branch: %+v, want one branch", bs)
	}
	b := bs[0]
	auto := fmt.Sprintf("b-%d", tip)
	if b.Name != auto || b.Tip != tip || b.Fork != fork || b.Changed.Added != 1 || b.Changed.Modified != 1 {
		t.Errorf("branch %+v: want %s, tip %d, fork %d, +1 ~1", b, auto, tip, fork)
	}

	graph := udRun(t, m, "log", "--graph")
	if !strings.Contains(graph, "@  g") || !strings.Contains(graph, "│ ○  g") || !strings.Contains(graph, "├─╯") || !strings.Contains(graph, "["+auto) {
		t.Errorf("reynfs log --graph does not draw the branch %s off the current path:\n%s", auto, graph)
	}
	udRun(t, m, "branch", "feature", auto)
	udRefused(t, m, "branch", "feature", "one") // taken
	udRefused(t, m, "branch", "12")             // reads as a seq
	udRefused(t, m, "checkout", "nosuch")

	m.Unmount()
	m.Mount()
	bs = brList(t, m)
	if len(bs) != 1 || len(bs[0].Names) != 1 || bs[0].Names[0] != "feature" {
		t.Fatalf("after a remount, reynfs branch: %+v, want %s named feature", bs, auto)
	}
	udRun(t, m, "checkout", "feature")
	udExpect(t, m, "after checkout feature", map[string]string{"a": "2", "b": "new"})
	l := udOps(t, m)
	last := l.Ops[len(l.Ops)-1]
	if last.Kind != "checkout" || last.Branch != "feature" || last.To != tip {
		t.Errorf("op log ends with %+v, want the checkout of feature to seq %d", last, tip)
	}
	// The checkout continued the branch: it is no branch any more, and
	// what it left (the rewound state) has no changes of its own.
	if bs := brList(t, m); len(bs) != 1 || bs[0].Name != "feature" || !bs[0].Current {
		t.Errorf("after checkout, reynfs branch: %+v, want only the name feature, on the current path", bs)
	}
	udRun(t, m, "undo")
	udExpect(t, m, "after undo of the checkout", map[string]string{"a": "1", "b": "(absent)"})
	// The target "feature" works wherever a target does.
	udRun(t, m, "rewind", "feature")
	udExpect(t, m, "after rewind feature", map[string]string{"a": "2", "b": "new"})
}
