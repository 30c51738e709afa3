package integration

// Issue 9 part 4: 'reynfs hook claude' driven by Claude Code's hook
// payloads against a real mount.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runHook pipes payload into 'reynfs hook TOOL', bounded as Claude Code
// bounds its hooks (here 10 s; the hook itself gives up after 2 s).
func runHook(t *testing.T, env []string, tool, payload string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, reynfsBin, "hook", tool)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.Stdin = strings.NewReader(payload)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := Result{Stdout: so.String(), Stderr: se.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("reynfs hook %s: %v", tool, err)
	}
	return r
}

func claudePayload(t *testing.T, cwd string, fields map[string]any) string {
	p := map[string]any{"session_id": "sess-42", "transcript_path": "/tmp/sess-42.jsonl", "cwd": cwd}
	for k, v := range fields {
		p[k] = v
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHookClaude: a prompt, a Bash call, a Read call and a Stop cut three
// generations (turn, tool, turn; the Read cuts none), the session is the
// agent's saved state, the hook prints nothing; with the daemon gone and
// with a bad payload it still exits 0 with one line on stderr.
func TestHookClaude(t *testing.T) {
	m := mountProject(t, t.TempDir())
	events := []map[string]any{
		{"hook_event_name": "UserPromptSubmit", "prompt": "Rename the parser\nthen run the tests"},
		{"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": map[string]any{"command": "echo x > f"}},
		{"hook_event_name": "PostToolUse", "tool_name": "Read", "tool_input": map[string]any{"file_path": "f"}},
		{"hook_event_name": "Stop"},
	}
	for _, ev := range events {
		start := time.Now()
		r := runHook(t, m.env, "claude", claudePayload(t, m.Dir, ev))
		if r.Code != 0 || r.Stdout != "" || r.Stderr != "" {
			t.Fatalf("hook %v: exit %d, stdout %q, stderr %q", ev["hook_event_name"], r.Code, r.Stdout, r.Stderr)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("hook %v took %s", ev["hook_event_name"], d)
		}
	}
	r := m.Run("log", "--dir", m.Dir)
	if r.Code != 0 {
		t.Fatalf("log: exit %d: %s", r.Code, r.Stderr)
	}
	var cut []string
	for _, l := range strings.Split(r.Stdout, "\n") {
		for _, want := range []string{"Rename the parser", "tool Bash", "tool Read", "end of turn"} {
			if strings.Contains(l, want) {
				cut = append(cut, want)
			}
		}
	}
	if got := strings.Join(cut, ","); got != "Rename the parser,tool Bash,end of turn" && got != "end of turn,tool Bash,Rename the parser" {
		t.Fatalf("generations cut: %s\nlog:\n%s", got, r.Stdout)
	}
	if !strings.Contains(r.Stdout, "tool") || !strings.Contains(r.Stdout, "turn") {
		t.Errorf("log lacks the kinds turn and tool:\n%s", r.Stdout)
	}
	r = m.Run("agent", "show", "claude", "--dir", m.Dir)
	if r.Code != 0 || !strings.Contains(r.Stdout, `"session_id":"sess-42"`) || !strings.Contains(r.Stdout, `"transcript_path":"/tmp/sess-42.jsonl"`) {
		t.Fatalf("agent show claude: exit %d: %q %s", r.Code, r.Stdout, r.Stderr)
	}

	r = m.Run("rewind", "--dir", m.Dir, "Rename the parser")
	if r.Code != 0 || !strings.Contains(r.Stdout, "claude --resume sess-42 --fork-session") {
		t.Fatalf("rewind to the prompt's generation: exit %d, no resume line:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	r = runHook(t, m.env, "claude", "{not json")
	if r.Code != 0 || r.Stdout != "" || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || r.Stderr == "" {
		t.Errorf("bad payload: exit %d, stdout %q, stderr %q; want 0, nothing, one line", r.Code, r.Stdout, r.Stderr)
	}
	m.Unmount()
	r = runHook(t, m.env, "claude", claudePayload(t, m.Dir, events[0]))
	if r.Code != 0 || r.Stdout != "" || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || r.Stderr == "" {
		t.Errorf("no daemon: exit %d, stdout %q, stderr %q; want 0, nothing, one line", r.Code, r.Stdout, r.Stderr)
	}
}

// TestIntegrateClaude: 'reynfs integrate claude' twice then --remove gives
// back the original settings.json byte for byte; a tool not supported is
// one line and exit 2.
func TestIntegrateClaude(t *testing.T) {
	dir := t.TempDir()
	orig := "{\n  \"model\": \"opus\",\n  \"hooks\": {\n    \"Stop\": [\n      {\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"make lint\"\n          }\n        ]\n      }\n    ]\n  }\n}\n"
	writeFile(t, filepath.Join(dir, ".claude", "settings.json"), []byte(orig), 0o600)
	env := testEnv(t)
	var after []string
	for i, args := range [][]string{{"integrate", "claude", "--dir", dir}, {"integrate", "claude", "--dir", dir}, {"integrate", "claude", "--remove", "--dir", dir}} {
		if r := runReynfs(env, args...); r.Code != 0 || r.Stdout != integrateSaid[i]+" "+filepath.Join(dir, ".claude", "settings.json")+"\n" || r.Stderr != "" {
			t.Fatalf("%v: exit %d: %q %q", args, r.Code, r.Stdout, r.Stderr)
		}
		b, err := os.ReadFile(filepath.Join(dir, ".claude", "settings.json"))
		if err != nil {
			t.Fatal(err)
		}
		after = append(after, string(b))
	}
	if !strings.Contains(after[0], `"reynfs hook claude"`) || !strings.Contains(after[0], `"make lint"`) {
		t.Errorf("integrate claude:\n%s", after[0])
	}
	if after[1] != after[0] {
		t.Errorf("second integrate changed settings:\n%s\n---\n%s", after[0], after[1])
	}
	if after[2] != orig {
		t.Errorf("--remove did not give back the original:\n%s", after[2])
	}
	r := runReynfs(env, "integrate", "vim", "--dir", dir)
	if r.Code != 2 || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
		t.Errorf("integrate vim: exit %d, stderr %q; want 2 and one line", r.Code, r.Stderr)
	}
}

// TestIntegrateAider: the post-commit block is added to an existing hook
// without clobbering it, once, and --remove gives the hook back.
func TestIntegrateAider(t *testing.T) {
	dir := t.TempDir()
	orig := "#!/bin/sh\necho committed >> /tmp/never-run\n"
	hook := filepath.Join(dir, ".git", "hooks", "post-commit")
	writeFile(t, hook, []byte(orig), 0o755)
	env := testEnv(t)
	for i, args := range [][]string{{"integrate", "aider", "--dir", dir}, {"integrate", "aider", "--dir", dir}, {"integrate", "aider", "--remove", "--dir", dir}} {
		if r := runReynfs(env, args...); r.Code != 0 || !strings.HasPrefix(r.Stdout, integrateSaid[i]+" ") || strings.Count(r.Stdout, "\n") != 1 || r.Stderr != "" {
			t.Fatalf("%v: exit %d: %q %q", args, r.Code, r.Stdout, r.Stderr)
		}
		b, err := os.ReadFile(hook)
		if err != nil {
			t.Fatal(err)
		}
		n := strings.Count(string(b), "reynfs checkpoint")
		if want := map[int]int{0: 1, 1: 1, 2: 0}[i]; n != want || !strings.HasPrefix(string(b), orig) {
			t.Fatalf("%v: hook has %d reynfs lines (want %d) or lost its content:\n%s", args, n, want, b)
		}
		if i == 2 && string(b) != orig {
			t.Errorf("--remove: %q, want %q", b, orig)
		}
	}
	if r := runReynfs(env, "integrate", "aider", "--dir", t.TempDir()); r.Code != 2 {
		t.Errorf("integrate aider outside a repository: exit %d, want 2", r.Code)
	}
}

// integrateSaid is what integrate, integrate again and integrate --remove
// print for a config file that existed before: one line each, the change
// and the path.
var integrateSaid = []string{"updated", "unchanged", "updated"}
