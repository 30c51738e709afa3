package hooks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reynfs/reynfs/agents/api"
)

// TestReplay replays the recorded payloads of testdata (written from each
// tool's documented hook format, see testdata/README.md) and checks the
// calls they turn into and what 'reynfs hook' answers on stdout.
func TestReplay(t *testing.T) {
	const (
		cursorSession   = "c0ffee00-1111-4222-8333-444455556666"
		clineTask       = "1764748800123"
		clineCLISession = "1796290836780_7xvyh"
		ohSession       = "3f1c2a9e-5b7d-4e21-9c0a-1d2e3f4a5b6c"
		codexSession    = "01a23b43-4046-7e23-bafe-e9fee970350c"
		goOn            = `{"continue":true}`
		noCancel        = `{"cancel":false}`
	)
	want := map[string]struct{ calls, reply string }{
		"claude-UserPromptSubmit.json": {calls: `agent.save claude abc123; checkpoint turn "Fix the failing test in parser.go"`},
		"claude-PostToolUse-Bash.json": {calls: `checkpoint tool "tool Bash"`},
		"claude-PostToolUse-Read.json": {},
		"claude-Stop.json":             {calls: `checkpoint turn "end of turn"`},
		"claude-SessionStart.json":     {calls: `agent.save claude abc123`},
		"gemini-BeforeAgent.json":      {calls: `agent.save gemini g-77; checkpoint turn "add a README"`},
		"gemini-AfterTool.json":        {calls: `checkpoint tool "tool write_file"`},
		"gemini-AfterAgent.json":       {calls: `checkpoint turn "end of turn"`},
		"gemini-SessionStart.json":     {calls: `agent.save gemini g-77`},

		"codex-SessionStart.json":            {calls: `agent.save codex ` + codexSession},
		"codex-UserPromptSubmit.json":        {calls: `agent.save codex ` + codexSession + `; checkpoint turn "Rename the parser"`},
		"codex-PreToolUse-Bash.json":         {},
		"codex-PostToolUse-Bash.json":        {calls: `checkpoint tool "tool Bash"`},
		"codex-PostToolUse-apply_patch.json": {calls: `checkpoint tool "tool apply_patch"`},
		"codex-Stop.json":                    {calls: `checkpoint turn "end of turn"`},
		"codex-notify.json":                  {calls: `agent.save codex ` + codexSession + `; checkpoint turn "end of turn"`},

		"cursor-sessionStart.json":        {calls: `agent.save cursor ` + cursorSession},
		"cursor-beforeSubmitPrompt.json":  {calls: `agent.save cursor ` + cursorSession + `; checkpoint turn "Fix the bug in main.ts"`, reply: goOn},
		"cursor-beforeReadFile.json":      {},
		"cursor-afterFileEdit.json":       {calls: `checkpoint tool "tool Write"`},
		"cursor-afterShellExecution.json": {calls: `checkpoint tool "tool Shell"`},
		"cursor-afterMCPExecution.json":   {calls: `checkpoint tool "tool MCP:database_query"`},
		"cursor-stop.json":                {calls: `checkpoint turn "end of turn"`},

		"cline-TaskStart.json":                 {calls: `agent.save cline ` + clineTask + `; checkpoint turn "Add a --verbose flag"`, reply: noCancel},
		"cline-TaskResume.json":                {calls: `agent.save cline ` + clineTask, reply: noCancel},
		"cline-UserPromptSubmit.json":          {calls: `agent.save cline ` + clineTask + `; checkpoint turn "Add a --verbose flag to the CLI"`, reply: noCancel},
		"cline-PreToolUse.json":                {reply: noCancel},
		"cline-PostToolUse-write_to_file.json": {calls: `checkpoint tool "tool write_to_file"`, reply: noCancel},
		"cline-PostToolUse-read_file.json":     {reply: noCancel},
		"cline-TaskComplete.json":              {calls: `checkpoint turn "end of turn"`, reply: noCancel},
		"cline-TaskCancel.json":                {calls: `checkpoint turn "end of turn"`, reply: noCancel},

		"cline-cli-TaskStart.json":          {calls: `agent.save cline ` + clineCLISession + `; checkpoint turn "new task"`, reply: noCancel},
		"cline-cli-PreToolUse.json":         {reply: noCancel},
		"cline-cli-PostToolUse-editor.json": {calls: `checkpoint tool "tool editor"`, reply: noCancel},
		"cline-cli-TaskComplete.json":       {calls: `checkpoint turn "end of turn"`, reply: noCancel},

		"openhands-SessionStart.json":             {calls: `agent.save openhands ` + ohSession},
		"openhands-UserPromptSubmit.json":         {calls: `agent.save openhands ` + ohSession + `; checkpoint turn "Make the tests pass"`},
		"openhands-PostToolUse-terminal.json":     {calls: `checkpoint tool "tool terminal"`},
		"openhands-PostToolUse-task_tracker.json": {},
		"openhands-Stop.json":                     {calls: `checkpoint turn "end of turn"`},
		"openhands-SessionEnd.json":               {},
	}
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) != len(want) {
		t.Fatalf("%d fixtures, want %d", len(files), len(want))
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		w, ok := want[name]
		if !ok {
			t.Fatalf("fixture %s has no expectation", name)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tool := strings.SplitN(name, "-", 2)[0]
		seen[tool] = true
		calls, p, err := Translate(tool, b)
		if err != nil || p == nil {
			t.Fatalf("%s: %v (payload %v)", name, err, p)
		}
		if p.Cwd != "/w" {
			t.Errorf("%s: cwd %q, want /w (the hook finds the mount from it)", name, p.Cwd)
		}
		var got []string
		for _, c := range calls {
			switch c := c.(type) {
			case api.CheckpointParams:
				got = append(got, "checkpoint "+c.Kind+" "+`"`+c.Label+`"`)
			case api.AgentSaveParams:
				var s State
				if err := json.Unmarshal(c.Data, &s); err != nil || s.Tool != tool || s.SessionID == "" || s.Cwd != "/w" {
					t.Errorf("%s: state %s: %v", name, c.Data, err)
				}
				if (tool == "claude" || tool == "gemini" || tool == "cursor" || tool == "codex" && name != "codex-notify.json") && s.TranscriptPath == "" {
					t.Errorf("%s: state %s has no transcript path", name, c.Data)
				}
				if Resume(c.Data) == "" {
					t.Errorf("%s: no resume hint for state %s", name, c.Data)
				}
				got = append(got, "agent.save "+c.Name+" "+s.SessionID)
			default:
				t.Fatalf("%s: unexpected call %s", name, c.Method())
			}
		}
		if g := strings.Join(got, "; "); g != w.calls {
			t.Errorf("%s: got %s, want %s", name, g, w.calls)
		}
		if r := Reply(tool, p); r != w.reply {
			t.Errorf("%s: reply %q, want %q", name, r, w.reply)
		}
	}
	for _, tool := range Tools {
		if !seen[tool] {
			t.Errorf("no fixture for %s", tool)
		}
	}
}

// TestUnknownEvent: an event a tool sends that the hook takes nothing from
// is no error and no call, as for Claude Code's PreToolUse; a payload
// without an event name is an error (one line); the answer on stdout is
// the same either way, so the agent goes on.
func TestUnknownEvent(t *testing.T) {
	for _, c := range []struct{ tool, unknown, noEvent string }{
		{"claude", `{"hook_event_name":"Notification","session_id":"s"}`, `{"session_id":"s"}`},
		{"codex", `{"hook_event_name":"PreCompact","session_id":"s"}`, `{"session_id":"s"}`},
		{"gemini", `{"hook_event_name":"BeforeModel","session_id":"s"}`, `{"session_id":"s"}`},
		{"cursor", `{"hook_event_name":"afterAgentThought","conversation_id":"s"}`, `{"conversation_id":"s"}`},
		{"cline", `{"hookName":"PreCompact","taskId":"s"}`, `{"taskId":"s"}`},
		{"openhands", `{"event_type":"Notification","session_id":"s"}`, `{"session_id":"s"}`},
	} {
		calls, p, err := Translate(c.tool, []byte(c.unknown))
		if err != nil || len(calls) != 0 || p == nil {
			t.Errorf("%s: unknown event: %d calls, %v", c.tool, len(calls), err)
		}
		_, p2, err := Translate(c.tool, []byte(c.noEvent))
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: payload without event: %v, want a one-line error", c.tool, err)
		}
		if Reply(c.tool, p) != Reply(c.tool, p2) || Reply(c.tool, p2) != Reply(c.tool, nil) {
			t.Errorf("%s: the answer depends on a broken payload", c.tool)
		}
	}
	// Codex notify sends other types than agent-turn-complete in some
	// versions (approval-requested): nothing to cut.
	if calls, _, err := Translate("codex", []byte(`{"type":"approval-requested","thread-id":"t"}`)); err != nil || len(calls) != 0 {
		t.Errorf("codex notify approval-requested: %d calls, %v", len(calls), err)
	}
}

func TestTranslateBadInput(t *testing.T) {
	for _, c := range []struct{ tool, payload string }{
		{"vim", `{}`},
		{"claude", `not json`},
		{"claude", `{"session_id":"x"}`},
	} {
		if _, _, err := Translate(c.tool, []byte(c.payload)); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("Translate(%s, %s) = %v, want a one-line error", c.tool, c.payload, err)
		}
	}
}

func TestLabelAndResume(t *testing.T) {
	long := strings.Repeat("é", 200)
	if l := Label(long); len([]rune(l)) != maxLabel {
		t.Errorf("label of %d runes, want %d", len([]rune(l)), maxLabel)
	}
	if l := Label("  \n\n"); l != "prompt" {
		t.Errorf("empty prompt labelled %q", l)
	}
	if r := Resume([]byte(`{"tool":"claude","session_id":"s1"}`)); r != "claude --resume s1 --fork-session" {
		t.Errorf("resume %q", r)
	}
	if r := Resume([]byte(`{"x":1}`)); r != "" {
		t.Errorf("resume of foreign state %q", r)
	}
}
