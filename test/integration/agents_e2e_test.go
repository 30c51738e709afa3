package integration

// Issue 9 part 5: the real agent CLIs from npm (installed by
// scripts/install-agents.sh), scripted through a model server on
// 127.0.0.1 (agentserver_test.go), working in a git repository inside a
// mount with reynfs's hooks: every turn and every shell call is a
// generation, and a rewind to the generation before the second turn brings
// back exactly the tree, the repository and the agent's saved state of
// that moment.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// agentTimeout bounds one CLI invocation: the CLIs start slowly (Claude
// Code's native binary is 400 MB, Gemini CLI loads a large bundle), the
// machine is shared, and a hung CLI must fail the test, not the suite.
const agentTimeout = 90 * time.Second

// agentCLI returns the path of a pinned agent CLI, installing it with
// scripts/install-agents.sh when missing (quick when present). Without npm
// or the registry it skips, and fails under CI=true.
func agentCLI(t *testing.T, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../../scripts/install-agents.sh", "--path", name)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		skipOrFail(t, "agent CLI %s not available: %v: %s", name, err, strings.TrimSpace(se.String()))
	}
	return strings.TrimSpace(so.String())
}

// gitRepo makes dir a git repository with a first commit: a source file,
// a docs directory (turn 2 deletes it) and a file that stays untouched.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	requireTool(t, "git")
	writeFile(t, filepath.Join(dir, "src", "main.txt"), []byte("version 1\n"), 0o644)
	writeFile(t, filepath.Join(dir, "docs", "guide.md"), []byte("# Guide\n"), 0o644)
	writeFile(t, filepath.Join(dir, "docs", "api", "ref.md"), []byte("# Reference\n"), 0o644)
	writeFile(t, filepath.Join(dir, "README"), []byte("untouched\n"), 0o644)
	sh(t, dir, nil, `git init -q -b main . && git config user.name Agent && git config user.email agent@example.invalid
		git config commit.gpgsign false
		printf '.claude/\n.gemini/\n' >> .git/info/exclude
		git add -A && git commit -q -m initial`)
}

// agentEnv is the environment of a CLI run: the mount's (so the hooks find
// the daemon), reynfs first in PATH (the hooks run 'reynfs hook'), HOME in
// a temp dir, and every kind of traffic but the model's turned off.
func agentEnv(t *testing.T, m *Mount, extra ...string) []string {
	home := t.TempDir()
	env := []string{
		"HOME=" + home,
		"PATH=" + filepath.Dir(reynfsBin) + ":" + os.Getenv("PATH"),
		"NO_COLOR=1", "TERM=dumb", "CI=1",
		"GIT_CONFIG_NOSYSTEM=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISABLE_NON_ESSENTIAL_MODEL_CALLS=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1",
	}
	for _, kv := range m.env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "PATH", "CI", "NO_COLOR", "TERM":
			continue
		}
		if strings.HasPrefix(k, "ANTHROPIC_") || strings.HasPrefix(k, "CLAUDE_") || strings.HasPrefix(k, "GEMINI_") ||
			strings.HasPrefix(k, "GOOGLE_") || strings.HasPrefix(k, "OPENAI_") {
			continue // nothing of the person running the tests reaches a real endpoint
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// envValue returns the value of key in env ("" when unset).
func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// runAgent runs one CLI invocation in dir, bounded by agentTimeout; its
// whole process group is killed on timeout (the shells it started too).
func runAgent(t *testing.T, dir string, env []string, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s %s: %s", filepath.Base(bin), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what it left running
	}
	if err != nil {
		t.Fatalf("%s %v: %v (timeout %s)\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), args, err, agentTimeout, clip(so.String(), 4000), clip(se.String(), 4000))
	}
	return so.String()
}

// treeSnapshot lists every entry under dir with its type, mode, size,
// modification time and content hash (symlinks: their target): two equal
// snapshots are the same tree for everything a tool can see.
func treeSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%s size=%d", fi.Mode(), fi.Size())
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc = fmt.Sprintf("%s mtime=%d sha=%x", desc, fi.ModTime().UnixNano(), sha256.Sum256(b))
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case fi.IsDir():
			desc = fmt.Sprintf("%s dir", fi.Mode())
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return out
}

// diffSnapshots describes how got differs from want ("" when equal).
func diffSnapshots(want, got map[string]string) string {
	var lines []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			lines = append(lines, "missing "+p+": "+w)
		} else if g != w {
			lines = append(lines, "changed "+p+": "+w+" -> "+g)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			lines = append(lines, "extra "+p+": "+g)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// repoState is what git says about the repository (run after the tree
// snapshot: git status may refresh the index).
func repoState(t *testing.T, dir string) string {
	t.Helper()
	return sh(t, dir, []string{"GIT_OPTIONAL_LOCKS=0"}, `git log --format='%H %s' && git status --porcelain=v1 --untracked-files=all && git rev-parse HEAD^{tree}`)
}

// generations returns the active generations, oldest first.
func generations(t *testing.T, m *Mount) []struct {
	ID    int    `json:"id"`
	Seq   uint64 `json:"seq"`
	Kind  string `json:"kind"`
	Label string `json:"label"`
	Act   bool   `json:"active"`
} {
	t.Helper()
	r := m.Run("log", "--dir", m.Dir, "--json")
	if r.Code != 0 {
		t.Fatalf("reynfs log --json: exit %d: %s", r.Code, r.Stderr)
	}
	var l struct {
		Gens []struct {
			ID    int    `json:"id"`
			Seq   uint64 `json:"seq"`
			Kind  string `json:"kind"`
			Label string `json:"label"`
			Act   bool   `json:"active"`
		} `json:"generations"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &l); err != nil {
		t.Fatalf("reynfs log --json: %v\n%s", err, r.Stdout)
	}
	out := l.Gens[:0]
	for _, g := range l.Gens {
		if g.Act {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// genSummary is "kind:label" of each generation cut by the hooks, in order,
// with the " (N)" the label rule appends to a repeated automatic label
// taken off (labels on the current path are unique: checked here).
func genSummary(t *testing.T, m *Mount) (summary []string, ids map[string]int) {
	ids = map[string]int{}
	seen := map[string]bool{}
	for _, g := range generations(t, m) {
		if g.Kind != "turn" && g.Kind != "tool" {
			continue
		}
		if seen[g.Label] {
			t.Errorf("label %q twice on the current path", g.Label)
		}
		seen[g.Label] = true
		label := repeatSuffix.ReplaceAllString(g.Label, "")
		summary = append(summary, g.Kind+":"+label)
		ids[label] = g.ID
	}
	return summary, ids
}

// repeatSuffix is what the label rule appends to a repeated label.
var repeatSuffix = regexp.MustCompile(` \([0-9]+\)$`)

// The two turns of the scripted session. Turn 1 edits a file, creates a
// directory and commits; turn 2 edits again, deletes a directory and
// commits. Every command is one Bash call.
var e2eScript = []scriptTurn{
	{Key: "Turn one", Commands: []string{
		"printf 'version 2\\n' > src/main.txt && mkdir -p gen && printf 'generated\\n' > gen/out.txt",
		"git add -A && git commit -q -m 'turn one'",
	}, Reply: "Turn one is done."},
	{Key: "Turn two", Commands: []string{
		"printf 'version 3\\n' >> src/main.txt && rm -rf docs",
		"git add -A && git commit -q -m 'turn two' && ln -s src/main.txt latest",
	}, Reply: "Turn two is done."},
	// After the rewind, in the conversation the rewind's hint resumes.
	{Key: "Turn three", Commands: []string{
		"printf 'version 2, forked\\n' > src/main.txt && git commit -q -am 'turn three'",
	}, Reply: "Turn three is done."},
}

// agentCase is one agent CLI as the two-turn scenario drives it.
type agentCase struct {
	name      string // reynfs's name of the tool: integrate, hook, agent show
	toolLabel string // label of the generation cut after a shell call
	// turn runs prompt in dir, with resume (the CLI's arguments that
	// resume a session) when given, and returns the session id and the
	// CLI's final reply.
	turn func(t *testing.T, dir, prompt string, resume ...string) (sessionID, reply string)
	// resume is the arguments that resume session, for turn 2.
	resume func(session string) []string
	// hint is what 'reynfs rewind' prints to resume the session.
	hint func(session string) string
	// fork, when not nil, is the hint as arguments: after the rewind, a
	// third turn runs with them and must continue from the rewound state.
	fork func(session string) []string
}

// twoTurns is the scenario of issue 9 part 5 with the hooks of
// 'reynfs integrate NAME' in a git repository inside a mount: turn 1 edits,
// creates and commits; turn 2 resumes the session, edits, deletes a
// directory and commits. Every turn and every shell call must be a
// generation, and a rewind to the generation before turn 2 must bring back
// exactly the tree, the repository and the agent's saved state of that
// moment, and print how to resume the conversation there.
func twoTurns(t *testing.T, m *Mount, srv *modelServer, a agentCase) {
	t.Helper()
	if r := m.Run("integrate", a.name, "--dir", m.Dir); r.Code != 0 {
		t.Fatalf("reynfs integrate %s: exit %d: %s", a.name, r.Code, r.Stderr)
	}
	session, reply := a.turn(t, m.Dir, "Turn one: bump the version\nand add generated output")
	if session == "" || !strings.Contains(reply, "Turn one is done") {
		t.Fatalf("turn 1: session %q, reply %q; want a session and the scripted reply\nrequests: %v", session, reply, srv.Requests())
	}
	if b, _ := os.ReadFile(filepath.Join(m.Dir, "gen", "out.txt")); string(b) != "generated\n" {
		t.Fatalf("turn 1's shell call did not run in the mount: gen/out.txt = %q", b)
	}

	// The moment before turn 2: what git says, the tree and the agent's
	// state (repoState sets GIT_OPTIONAL_LOCKS=0, so git status does not
	// refresh the index: asking git changes nothing that is compared).
	before2Repo := repoState(t, m.Dir)
	before2Tree := treeSnapshot(t, m.Dir)
	r := m.Run("agent", "show", a.name, "--dir", m.Dir)
	if r.Code != 0 || !strings.Contains(r.Stdout, session) {
		t.Fatalf("agent show %s after turn 1: exit %d: %s%s (want session %s)\nreynfs log:\n%s", a.name, r.Code, r.Stdout, r.Stderr, session, m.Run("log", "--dir", m.Dir).Stdout)
	}
	before2Agent := r.Stdout

	_, reply = a.turn(t, m.Dir, "Turn two: bump again\nand delete the docs", a.resume(session)...)
	if !strings.Contains(reply, "Turn two is done") {
		t.Fatalf("turn 2 did not end with the scripted reply: %q", reply)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "docs")); !os.IsNotExist(err) {
		t.Fatalf("turn 2's rm -rf docs did not happen: %v", err)
	}
	if tools, ends := srv.counts(); tools != 4 || ends != 2 {
		t.Fatalf("model server handed out %d shell calls and ended %d turns, want 4 and 2; requests: %v", tools, ends, srv.Requests())
	}

	// Every turn and every shell call is a generation, in order.
	got, ids := genSummary(t, m)
	tool := "tool:" + a.toolLabel
	want := []string{
		"turn:Turn one: bump the version", tool, tool, "turn:end of turn",
		"turn:Turn two: bump again", tool, tool, "turn:end of turn",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("generations cut by the hooks:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}

	target := fmt.Sprintf("g%d", ids["Turn two: bump again"])
	r = m.Run("agent", "show", a.name, "--dir", m.Dir, "--at", target)
	if r.Code != 0 {
		t.Fatalf("agent show %s --at %s: exit %d: %s", a.name, target, r.Code, r.Stderr)
	}
	atTarget := r.Stdout
	checkSameSession(t, before2Agent, atTarget)

	r = m.Run("rewind", "--dir", m.Dir, target)
	if r.Code != 0 {
		t.Fatalf("reynfs rewind %s: exit %d: %s%s", target, r.Code, r.Stdout, r.Stderr)
	}
	if hint := a.hint(session); !strings.Contains(r.Stdout, hint) {
		t.Errorf("rewind's output lacks %q:\n%s", hint, r.Stdout)
	}
	if d := diffSnapshots(before2Tree, treeSnapshot(t, m.Dir)); d != "" {
		t.Errorf("the tree after the rewind is not the tree before turn 2:\n%s", d)
	}
	if got := repoState(t, m.Dir); got != before2Repo {
		t.Errorf("git after the rewind:\n%s\nwant (before turn 2):\n%s", got, before2Repo)
	}
	sh(t, m.Dir, nil, "git fsck --full --strict --no-progress")
	r = m.Run("agent", "show", a.name, "--dir", m.Dir)
	if r.Code != 0 || r.Stdout != atTarget {
		t.Errorf("agent show %s after the rewind: exit %d:\n%s\nwant (its state at %s):\n%s", a.name, r.Code, r.Stdout, target, atTarget)
	}
	if a.fork != nil {
		forkAfterRewind(t, m, srv, a, session, before2Repo)
	}
	t.Logf("model server requests: %v", srv.Requests())
	m.Unmount()
}

// forkAfterRewind runs a third turn with the arguments the rewind printed:
// it must start a new session, run in the rewound tree (its commit goes on
// top of turn 1's) and be cut into generations on the new path.
func forkAfterRewind(t *testing.T, m *Mount, srv *modelServer, a agentCase, session, before2Repo string) {
	t.Helper()
	forked, reply := a.turn(t, m.Dir, "Turn three: after the rewind", a.fork(session)...)
	if forked == "" || forked == session || !strings.Contains(reply, "Turn three is done") {
		t.Fatalf("turn 3 with %v: session %q (the rewound one %s), reply %q; want a new session and the scripted reply", a.fork(session), forked, session, reply)
	}
	if tools, ends := srv.counts(); tools != 5 || ends != 3 {
		t.Fatalf("model server handed out %d shell calls and ended %d turns after turn 3, want 5 and 3", tools, ends)
	}
	log := sh(t, m.Dir, nil, "git log --format=%s && git status --porcelain=v1 && git fsck --full --strict --no-progress")
	if want := "turn three\nturn one\ninitial\n"; log != want {
		t.Errorf("git after turn 3: %q, want %q (turn 3's commit on top of turn 1's, nothing else changed)", log, want)
	}
	if !strings.Contains(before2Repo, "turn one") {
		t.Fatalf("the repository before turn 2 lacks turn one's commit:\n%s", before2Repo)
	}
	got, _ := genSummary(t, m)
	tail := "turn:Turn three: after the rewind|tool:" + a.toolLabel + "|turn:end of turn"
	if !strings.HasSuffix(strings.Join(got, "|"), tail) || len(got) != 8 {
		t.Errorf("active generations after turn 3:\n  %s\nwant turn 1's four, turn 2's prompt and then %s", strings.Join(got, "\n  "), tail)
	}
	if r := m.Run("agent", "show", a.name, "--dir", m.Dir); r.Code != 0 || !strings.Contains(r.Stdout, forked) {
		t.Errorf("agent show %s after turn 3: exit %d: %s; want the forked session %s", a.name, r.Code, r.Stdout, forked)
	}
}

// TestClaudeCodeE2E: the real Claude Code CLI (print mode, as root with
// only the Bash tool allowed) in the two-turn scenario; turn 2 resumes
// turn 1's session with --resume.
func TestClaudeCodeE2E(t *testing.T) {
	requireFUSE(t)
	claude := agentCLI(t, "claude")
	dir := filepath.Join(t.TempDir(), "proj")
	gitRepo(t, dir)
	m := mountProject(t, dir)
	srv := newModelServer(t, e2eScript)
	env := agentEnv(t, m, "ANTHROPIC_BASE_URL="+srv.URL(), "ANTHROPIC_API_KEY=sk-ant-scripted-test")
	twoTurns(t, m, srv, agentCase{
		name:      "claude",
		toolLabel: "tool Bash",
		turn: func(t *testing.T, dir, prompt string, resume ...string) (string, string) {
			args := []string{"-p", prompt, "--allowedTools", "Bash", "--output-format", "json", "--model", "claude-sonnet-4-5"}
			out := runAgent(t, dir, env, claude, append(args, resume...)...)
			var res struct {
				SessionID string `json:"session_id"`
				Result    string `json:"result"`
				IsError   bool   `json:"is_error"`
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &res); err != nil || res.IsError {
				t.Fatalf("claude's JSON result: %v: %s", err, out)
			}
			return res.SessionID, res.Result
		},
		resume: func(session string) []string { return []string{"--resume", session} },
		hint:   func(session string) string { return "claude --resume " + session + " --fork-session" },
		fork:   func(session string) []string { return []string{"--resume", session, "--fork-session"} },
	})
}

// checkSameSession: the agent's saved state at the generation before a
// turn names the same conversation (tool, session, transcript, directory)
// as the state saved before that turn began. Only prompt_id may differ:
// the turn's own prompt hook saves it just before it cuts the generation,
// so it names the prompt the turn starts with.
func checkSameSession(t *testing.T, before, at string) {
	t.Helper()
	var b, a map[string]any
	if json.Unmarshal([]byte(before), &b) != nil || json.Unmarshal([]byte(at), &a) != nil {
		t.Fatalf("agent states are not JSON:\n%s\n%s", before, at)
	}
	delete(b, "prompt_id")
	delete(a, "prompt_id")
	if fmt.Sprint(a) != fmt.Sprint(b) || b["session_id"] == nil {
		t.Errorf("agent state at the generation before the turn:\n%s\nwant the same session as before the turn:\n%s", at, before)
	}
}

// TestGeminiCLIE2E: the real Gemini CLI (headless -p, yolo approval so
// the shell tool runs unattended) in the two-turn scenario; turn 2 resumes
// turn 1's session with --resume.
func TestGeminiCLIE2E(t *testing.T) {
	requireFUSE(t)
	gemini := agentCLI(t, "gemini")
	dir := filepath.Join(t.TempDir(), "proj")
	gitRepo(t, dir)
	m := mountProject(t, dir)
	srv := newModelServer(t, e2eScript)
	// --skip-trust is applied after the settings are loaded, and the
	// settings of a workspace not yet trusted are loaded without their
	// hooks; the variable it sets, set from the start, trusts the project.
	env := agentEnv(t, m, "GOOGLE_GEMINI_BASE_URL="+srv.URL(), "GEMINI_API_KEY=scripted-test-key", "GEMINI_CLI_TRUST_WORKSPACE=true",
		// Without it the CLI re-executes itself with a larger heap: one more
		// load of its bundle (seconds here) for nothing the test needs.
		"GEMINI_CLI_NO_RELAUNCH=true")
	// A base URL alone selects the "gateway" auth type, which headless
	// mode refuses ("Invalid auth method selected"); the API key type
	// takes the base URL as well.
	userSettings := `{"security": {"auth": {"selectedType": "gemini-api-key"}}, "privacy": {"usageStatisticsEnabled": false}, "general": {"disableAutoUpdate": true}}`
	writeFile(t, filepath.Join(envValue(env, "HOME"), ".gemini", "settings.json"), []byte(userSettings), 0o600)
	twoTurns(t, m, srv, agentCase{
		name:      "gemini",
		toolLabel: "tool run_shell_command",
		turn: func(t *testing.T, dir, prompt string, resume ...string) (string, string) {
			args := []string{"-p", prompt, "--approval-mode", "yolo", "--output-format", "json", "--model", "gemini-2.5-flash"}
			out := runAgent(t, dir, env, gemini, append(args, resume...)...)
			var res struct {
				SessionID string `json:"session_id"`
				Response  string `json:"response"`
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &res); err != nil {
				t.Fatalf("gemini's JSON result: %v: %s", err, out)
			}
			return res.SessionID, res.Response
		},
		resume: func(session string) []string { return []string{"--resume", session} },
		// What the rewind prints for Gemini CLI is not a command line
		// (docs/agents.md), so there is no third turn.
		hint: func(session string) string { return "gemini --resume " + session },
	})
}
