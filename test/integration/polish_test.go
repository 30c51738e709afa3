package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/timeline"
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

// countingCaller is the daemon's API client, counting the calls made.
type countingCaller struct {
	c       *api.Client
	methods []string
}

func (cc *countingCaller) Do(ctx context.Context, p api.Params, res any) error {
	cc.methods = append(cc.methods, p.Method())
	return cc.c.Do(ctx, p, res)
}

// TestTimelinePointsOneLoad: the picker's points, with the agent column
// (agent and hook session) and the names of abandoned branches, cost two
// calls to the real daemon (log with agent states, branch.list) whatever
// the number of points, where they cost agent.list and agent.show per
// point before.
func TestTimelinePointsOneLoad(t *testing.T) {
	m := mountProject(t, t.TempDir())
	run := func(args ...string) string {
		t.Helper()
		r := m.Run(append(args, "--dir", m.Dir)...)
		if r.Code != 0 {
			t.Fatalf("reynfs %v: exit %d: %s%s", args, r.Code, r.Stdout, r.Stderr)
		}
		return r.Stdout
	}
	state := filepath.Join(t.TempDir(), "state.json")
	writeFile(t, state, []byte(`{"tool":"claude","session_id":"1a2b3c4d5e6f7a8b"}`), 0o644)
	writeFile(t, filepath.Join(m.Dir, "a"), []byte("a\n"), 0o644)
	run("agent", "save", "claude", state)
	run("checkpoint", "-m", "one")
	for i, l := range []string{"two", "three", "four"} {
		writeFile(t, filepath.Join(m.Dir, l), []byte(fmt.Sprint(i)), 0o644)
		run("checkpoint", "-m", l)
	}
	run("rewind", "one")
	var bs []struct {
		Name string `json:"name"`
		Gen  int    `json:"tip_gen"`
	}
	if err := json.Unmarshal([]byte(run("branch", "--json")), &bs); err != nil || len(bs) != 1 {
		t.Fatalf("branch --json: %+v, %v; want the one branch the rewind left", bs, err)
	}
	run("branch", "spike", bs[0].Name)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := api.Dial(ctx, socketOf(t, m.Store))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc := &countingCaller{c: c}
	_, pts, err := (&timeline.API{C: cc}).Points(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"log", "branch.list"}; !slices.Equal(cc.methods, want) {
		t.Errorf("one load called %v; want %v", cc.methods, want)
	}
	byLabel := map[string]timeline.Point{}
	for _, p := range pts {
		byLabel[p.Label] = p
	}
	if p := byLabel["one"]; p.Agent != "claude/1a2b3c4d" {
		t.Errorf("point one: agent column %q; want claude/1a2b3c4d (its state changed there, saved by a hook)", p.Agent)
	}
	if p := byLabel["two"]; p.Agent != "" {
		t.Errorf("point two: agent column %q; want none (no agent saved since one)", p.Agent)
	}
	four := byLabel["four"]
	if four.Active || four.ID != bs[0].Gen || !slices.Equal(four.Branches, []string{bs[0].Name, "spike"}) {
		t.Errorf("point four (the abandoned tip, g%d): active %v, branches %v; want abandoned, [%s spike]", bs[0].Gen, four.Active, four.Branches, bs[0].Name)
	}
	for _, l := range []string{"one", "two", "three"} {
		if len(byLabel[l].Branches) != 0 {
			t.Errorf("point %s: branches %v; want none (not a branch's tip)", l, byLabel[l].Branches)
		}
	}
}

// TestRunJSON: `reynfs run --json` prints a run.started line once CMD runs
// and a run.exited line with CMD's exit code, both on stderr, and leaves
// stdout to CMD alone; --json-file puts the two lines in a file and
// nothing of reynfs's on stderr.
func TestRunJSON(t *testing.T) {
	m := mountProject(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	script := "echo out; echo err >&2; exit 3"
	events := func(what string, lines []string) []api.Event {
		t.Helper()
		var evs []api.Event
		for _, l := range lines {
			if !strings.HasPrefix(l, "{") {
				continue
			}
			var ev api.Event
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("%s: line %q: %v", what, l, err)
			}
			evs = append(evs, ev)
		}
		if len(evs) != 2 || evs[0].Type != api.EventRunStarted || evs[1].Type != api.EventRunExited {
			t.Fatalf("%s: events %+v; want run.started, run.exited", what, evs)
		}
		s, e := evs[0].Run, evs[1].Run
		if s == nil || e == nil || s.ID == "" || s.ID != e.ID || s.Pid <= 0 || s.Agent != "coder" || s.State != "running" ||
			e.ExitCode != 3 || e.State != "exited" || evs[1].Head.Seq == 0 {
			t.Fatalf("%s: started %+v, exited %+v (head %+v); want one run of agent coder with a pid, exited with 3", what, s, e, evs[1].Head)
		}
		return evs
	}
	split := func(b []byte) []string { return strings.Split(strings.TrimSpace(string(b)), "\n") }

	cmd := reynfsRun(ctx, m, "--json", "--agent", "coder", "--", "sh", "-c", script)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("reynfs run --json: %v; want exit 3\n%s", err, stderr.String())
	}
	if stdout.String() != "out\n" {
		t.Errorf("reynfs run --json: stdout %q; want CMD's alone, \"out\\n\"", stdout.String())
	}
	events("stderr", split([]byte(stderr.String())))
	if !strings.Contains(stderr.String(), "\nerr\n") && !strings.HasPrefix(stderr.String(), "err\n") {
		t.Errorf("reynfs run --json: CMD's stderr line missing:\n%s", stderr.String())
	}

	file := filepath.Join(t.TempDir(), "run.jsonl")
	cmd = reynfsRun(ctx, m, "--json-file", file, "--agent", "coder", "--", "sh", "-c", script)
	stdout.Reset()
	stderr.Reset()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("reynfs run --json-file: %v; want exit 3\n%s", err, stderr.String())
	}
	if stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Errorf("reynfs run --json-file: stdout %q stderr %q; want CMD's own, \"out\\n\" and \"err\\n\"", stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := split(b)
	if len(lines) != 2 {
		t.Fatalf("--json-file holds %d lines; want 2:\n%s", len(lines), b)
	}
	events("--json-file", lines)
}

// TestIntegrateJSON: `reynfs integrate TOOL --json` says which files it
// created, updated, removed or left unchanged, for a config merge
// (claude) and for the per-event hook files (cline).
func TestIntegrateJSON(t *testing.T) {
	dir := t.TempDir()
	integrate := func(args ...string) api.IntegrateInfo {
		t.Helper()
		r := runReynfs(testEnv(t), append([]string{"integrate", "--dir", dir, "--json"}, args...)...)
		if r.Code != 0 {
			t.Fatalf("reynfs integrate %v: exit %d: %s", args, r.Code, r.Stderr)
		}
		var info api.IntegrateInfo
		if err := json.Unmarshal([]byte(r.Stdout), &info); err != nil {
			t.Fatalf("reynfs integrate %v --json: %v\n%s", args, err, r.Stdout)
		}
		return info
	}
	changes := func(info api.IntegrateInfo) []string {
		var out []string
		for _, f := range info.Files {
			out = append(out, f.Change)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	settings := filepath.Join(dir, ".claude", "settings.json")
	for _, c := range []struct {
		args []string
		want string
	}{{[]string{"claude"}, "created"}, {[]string{"claude"}, "unchanged"}, {[]string{"claude", "--remove"}, "updated"}} {
		info := integrate(c.args...)
		if info.Tool != "claude" || info.Removed != slices.Contains(c.args, "--remove") || len(info.Files) != 1 ||
			info.Files[0].Path != settings || info.Files[0].Change != c.want {
			t.Errorf("integrate %v: %+v; want %s %s", c.args, info, settings, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{{[]string{"cline"}, "created"}, {[]string{"cline"}, "unchanged"}, {[]string{"cline", "--remove"}, "removed"}} {
		info := integrate(c.args...)
		if got := changes(info); len(info.Files) < 2 || !slices.Equal(got, []string{c.want}) {
			t.Errorf("integrate %v: %+v; want every hook file %s", c.args, info, c.want)
		}
	}
}
