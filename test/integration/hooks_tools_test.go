package integration

// Issue 9 part 4 for the tools beyond Claude Code: 'reynfs hook
// codex|cursor|cline|openhands' driven by each tool's documented payloads
// against a real mount, and 'reynfs integrate' of each tool's config.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// toolTurn is one turn of a tool: a prompt, a write, the end, in that
// tool's payloads.
type toolTurn struct {
	tool   string
	label  string         // the prompt's first line
	events []string       // payloads, in order
	reply  map[int]string // stdout wanted per event ("" when absent)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func toolTurns(t *testing.T, dir string) []toolTurn {
	codex := func(ev string, kv map[string]any) string {
		p := map[string]any{"session_id": "codex-s1", "turn_id": "turn-1", "transcript_path": nil, "cwd": dir,
			"hook_event_name": ev, "model": "gpt-5.1-codex", "permission_mode": "default"}
		for k, v := range kv {
			p[k] = v
		}
		return mustJSON(t, p)
	}
	cursor := func(ev string, kv map[string]any) string {
		p := map[string]any{"conversation_id": "cursor-c1", "generation_id": "g1", "hook_event_name": ev,
			"workspace_roots": []string{dir}, "transcript_path": "/tmp/cursor-c1.txt"}
		for k, v := range kv {
			p[k] = v
		}
		return mustJSON(t, p)
	}
	cline := func(hook string, kv map[string]any) string {
		p := map[string]any{"clineVersion": "3.38.0", "hookName": hook, "timestamp": "1", "taskId": "cline-t1",
			"workspaceRoots": []string{dir}, "userId": "u"}
		for k, v := range kv {
			p[k] = v
		}
		return mustJSON(t, p)
	}
	oh := func(ev string, kv map[string]any) string {
		p := map[string]any{"event_type": ev, "session_id": "oh-s1", "working_dir": dir, "metadata": map[string]any{}}
		for k, v := range kv {
			p[k] = v
		}
		return mustJSON(t, p)
	}
	return []toolTurn{
		{tool: "codex", label: "Codex renames the parser", events: []string{
			codex("UserPromptSubmit", map[string]any{"prompt": "Codex renames the parser\nand runs the tests"}),
			codex("PostToolUse", map[string]any{"tool_name": "Bash", "tool_use_id": "c1", "tool_input": map[string]any{"command": "true"}, "tool_response": ""}),
			codex("Stop", map[string]any{"stop_hook_active": false}),
		}},
		{tool: "cursor", label: "Cursor fixes main.ts", events: []string{
			cursor("beforeSubmitPrompt", map[string]any{"prompt": "Cursor fixes main.ts"}),
			cursor("afterFileEdit", map[string]any{"file_path": filepath.Join(dir, "main.ts"), "edits": []any{}}),
			cursor("stop", map[string]any{"status": "completed", "loop_count": 0}),
		}, reply: map[int]string{0: `{"continue":true}`}},
		{tool: "cline", label: "Cline adds a flag", events: []string{
			cline("UserPromptSubmit", map[string]any{"userPromptSubmit": map[string]any{"prompt": "Cline adds a flag"}}),
			cline("PostToolUse", map[string]any{"postToolUse": map[string]any{"toolName": "write_to_file", "success": true}}),
			cline("TaskComplete", map[string]any{"taskComplete": map[string]any{"taskMetadata": map[string]any{"taskId": "cline-t1"}}}),
		}, reply: map[int]string{0: `{"cancel":false}`, 1: `{"cancel":false}`, 2: `{"cancel":false}`}},
		{tool: "openhands", label: "OpenHands cleans up", events: []string{
			oh("UserPromptSubmit", map[string]any{"message": "OpenHands cleans up"}),
			oh("PostToolUse", map[string]any{"tool_name": "terminal", "tool_input": map[string]any{"command": "true"}, "tool_output": ""}),
			oh("Stop", nil),
		}},
	}
}

// TestHookTools: each tool's prompt, write and end of turn cut three
// generations, the tool's session is its saved state, stdout carries
// exactly the answer the tool requires, and a rewind to the last prompt
// says how to resume each of the four conversations. Codex's notify
// program (payload as an argument) cuts an end of turn too.
func TestHookTools(t *testing.T) {
	m := mountProject(t, t.TempDir())
	turns := toolTurns(t, m.Dir)
	for _, tt := range turns {
		for i, p := range tt.events {
			start := time.Now()
			r := runHook(t, m.env, tt.tool, p)
			want := ""
			if tt.reply[i] != "" {
				want = tt.reply[i] + "\n"
			}
			if r.Code != 0 || r.Stdout != want || r.Stderr != "" {
				t.Fatalf("hook %s event %d: exit %d, stdout %q (want %q), stderr %q", tt.tool, i, r.Code, r.Stdout, want, r.Stderr)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("hook %s event %d took %s", tt.tool, i, d)
			}
		}
	}
	notify := mustJSON(t, map[string]any{"type": "agent-turn-complete", "thread-id": "codex-s2", "turn-id": "7",
		"cwd": m.Dir, "input-messages": []string{"x"}, "last-assistant-message": "done"})
	if r := m.Run("hook", "codex", notify); r.Code != 0 || r.Stdout != "" || r.Stderr != "" {
		t.Fatalf("codex notify: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}

	r := m.Run("log", "--dir", m.Dir)
	if r.Code != 0 {
		t.Fatalf("log: exit %d: %s", r.Code, r.Stderr)
	}
	for _, tt := range turns {
		var cut []string
		for _, l := range strings.Split(r.Stdout, "\n") {
			if strings.Contains(l, tt.label) {
				cut = append(cut, "prompt")
			}
		}
		if len(cut) != 1 {
			t.Errorf("%s: %d generations labelled %q, want 1\nlog:\n%s", tt.tool, len(cut), tt.label, r.Stdout)
		}
	}
	for want, n := range map[string]int{"end of turn": 5, "tool Bash": 1, "tool Write": 1, "tool write_to_file": 1, "tool terminal": 1} {
		if got := strings.Count(r.Stdout, want); got != n {
			t.Errorf("log has %q %d times, want %d:\n%s", want, got, n, r.Stdout)
		}
	}
	for tool, session := range map[string]string{"cursor": "cursor-c1", "cline": "cline-t1", "openhands": "oh-s1", "codex": "codex-s2"} {
		r := m.Run("agent", "show", tool, "--dir", m.Dir)
		if r.Code != 0 || !strings.Contains(r.Stdout, `"session_id":"`+session+`"`) {
			t.Errorf("agent show %s: exit %d: %q %s", tool, r.Code, r.Stdout, r.Stderr)
		}
	}

	r = m.Run("rewind", "--dir", m.Dir, turns[len(turns)-1].label)
	if r.Code != 0 {
		t.Fatalf("rewind: exit %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, want := range []string{"codex resume codex-s1 (turn turn-1)", "cursor: reopen conversation cursor-c1", "cline --id cline-t1", "openhands: resume conversation oh-s1"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("rewind output lacks %q:\n%s", want, r.Stdout)
		}
	}
}

// TestIntegrateTools: 'reynfs integrate' of Codex, Cursor and OpenHands
// twice then --remove gives back the original file byte for byte; for
// Cline it writes seven executables and removes exactly them, and refuses
// (exit 2, nothing written) when a hook file of someone else's is there.
func TestIntegrateTools(t *testing.T) {
	env := testEnv(t)
	orig := "{\n  \"hooks\": {\n    \"Stop\": [\n      {\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"make lint\"\n          }\n        ]\n      }\n    ]\n  }\n}\n"
	for tool, file := range map[string]string{"codex": ".codex/hooks.json", "cursor": ".cursor/hooks.json", "openhands": ".openhands/hooks.json"} {
		dir := t.TempDir()
		path := filepath.Join(dir, file)
		writeFile(t, path, []byte(orig), 0o600)
		var after []string
		for i, args := range [][]string{{"integrate", tool, "--dir", dir}, {"integrate", tool, "--dir", dir}, {"integrate", tool, "--remove", "--dir", dir}} {
			if r := runReynfs(env, args...); r.Code != 0 || !strings.HasPrefix(r.Stdout, integrateSaid[i]+" ") || strings.Count(r.Stdout, "\n") != 1 || r.Stderr != "" {
				t.Fatalf("%v: exit %d: %q %q", args, r.Code, r.Stdout, r.Stderr)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			after = append(after, string(b))
		}
		if strings.Count(after[0], `"reynfs hook `+tool+`"`) < 4 || !strings.Contains(after[0], `"make lint"`) {
			t.Errorf("integrate %s:\n%s", tool, after[0])
		}
		if after[1] != after[0] {
			t.Errorf("second integrate %s changed %s", tool, file)
		}
		if after[2] != orig {
			t.Errorf("integrate %s --remove did not give back the original:\n%s", tool, after[2])
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600 kept", file, fi.Mode(), err)
		}
	}

	dir := t.TempDir()
	hookDir := filepath.Join(dir, ".clinerules", "hooks")
	if r := runReynfs(env, "integrate", "cline", "--dir", dir); r.Code != 0 || r.Stderr != "" {
		t.Fatalf("integrate cline: exit %d: %q", r.Code, r.Stderr)
	}
	ents, _ := os.ReadDir(hookDir)
	if len(ents) != 7 {
		t.Fatalf("integrate cline wrote %d hook files, want 7", len(ents))
	}
	for _, e := range ents {
		fi, _ := e.Info()
		b, _ := os.ReadFile(filepath.Join(hookDir, e.Name()))
		if fi.Mode().Perm()&0o111 == 0 || !strings.Contains(string(b), "exec reynfs hook cline") {
			t.Errorf("%s: mode %v, content %q", e.Name(), fi.Mode(), b)
		}
	}
	if r := runReynfs(env, "integrate", "cline", "--remove", "--dir", dir); r.Code != 0 {
		t.Fatalf("integrate cline --remove: exit %d: %q", r.Code, r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, ".clinerules")); !os.IsNotExist(err) {
		t.Errorf("--remove left .clinerules behind (%v)", err)
	}
	theirs := "#!/bin/sh\necho '{\"cancel\": false}'\n"
	writeFile(t, filepath.Join(hookDir, "PostToolUse"), []byte(theirs), 0o755)
	r := runReynfs(env, "integrate", "cline", "--dir", dir)
	if r.Code != 2 || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
		t.Errorf("integrate cline over a foreign hook: exit %d, stderr %q; want 2 and one line", r.Code, r.Stderr)
	}
	if ents, _ := os.ReadDir(hookDir); len(ents) != 1 {
		t.Errorf("a refused integrate wrote %d files", len(ents)-1)
	}
	if b, _ := os.ReadFile(filepath.Join(hookDir, "PostToolUse")); string(b) != theirs {
		t.Errorf("foreign hook changed: %q", b)
	}
}
