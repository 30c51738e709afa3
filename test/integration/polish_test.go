package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// logGen is one generation of `reynfs log --json`, with who cut it.
type logGen struct {
	ID    int    `json:"id"`
	Seq   uint64 `json:"seq"`
	Label string `json:"label"`
	Pid   uint32 `json:"pid"`
	Comm  string `json:"comm"`
	Run   string `json:"run"`
	Agent string `json:"agent"`
}

// gensOf lists the generations `reynfs log --json ARGS` shows, newest first.
func gensOf(t *testing.T, m *Mount, args ...string) []logGen {
	t.Helper()
	r := m.Run(append([]string{"log", "--json", "--dir", m.Dir}, args...)...)
	if r.Code != 0 {
		t.Fatalf("reynfs log --json %v: exit %d: %s%s", args, r.Code, r.Stdout, r.Stderr)
	}
	var l struct {
		Gens []logGen `json:"generations"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &l); err != nil {
		t.Fatalf("reynfs log --json: %v\n%s", err, r.Stdout)
	}
	return l.Gens
}

// TestCheckpointRunAttribution: a checkpoint asked from inside a `reynfs
// run --agent` (as a hook of an agent started that way asks it) names the
// run and the agent on its generation, in `log --json` and in the log's
// generation row; one asked from outside any run names none.
func TestCheckpointRunAttribution(t *testing.T) {
	m := mountProject(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	script := fmt.Sprintf("echo x > f && %q checkpoint -m inside", reynfsBin)
	if out, err := reynfsRun(ctx, m, "--agent", "coder", "--", "sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("reynfs run -- sh -c %q: %v\n%s", script, err, out)
	}
	if r := m.Run("checkpoint", "--dir", m.Dir, "-m", "outside"); r.Code != 0 {
		t.Fatalf("reynfs checkpoint -m outside: exit %d: %s", r.Code, r.Stderr)
	}
	_, runs := runsOf(t, m)
	if len(runs) != 1 {
		t.Fatalf("runs = %+v; want the one run", runs)
	}
	id := runs[0].ID
	seen := 0
	for _, g := range gensOf(t, m) {
		switch g.Label {
		case "inside":
			seen++
			if g.Run != id || g.Agent != "coder" || g.Pid == 0 || g.Comm != "reynfs" {
				t.Errorf("generation %q: run %q agent %q pid %d comm %q; want run %s, agent coder, the reynfs checkpoint process",
					g.Label, g.Run, g.Agent, g.Pid, g.Comm, id)
			}
		case "outside":
			seen++
			if g.Run != "" || g.Agent != "" {
				t.Errorf("generation %q (outside any run): run %q agent %q; want none", g.Label, g.Run, g.Agent)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("log --json: %d of the generations inside and outside", seen)
	}
	r := m.Run("log", "--dir", m.Dir)
	want := fmt.Sprintf("%q  run %s (coder)", "inside", id)
	if r.Code != 0 || !strings.Contains(r.Stdout, want) {
		t.Errorf("reynfs log: exit %d; want the row of \"inside\" to end with %s:\n%s%s", r.Code, want, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stdout, `"outside"  run`) {
		t.Errorf("reynfs log: the checkpoint from outside names a run:\n%s", r.Stdout)
	}
}
