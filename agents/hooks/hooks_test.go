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
// tool's documented hook format) and checks the calls they turn into.
func TestReplay(t *testing.T) {
	want := map[string]string{
		"claude-UserPromptSubmit.json": `agent.save claude abc123; checkpoint turn "Fix the failing test in parser.go"`,
		"claude-PostToolUse-Bash.json": `checkpoint tool "tool Bash"`,
		"claude-PostToolUse-Read.json": ``,
		"claude-Stop.json":             `checkpoint turn "end of turn"`,
		"claude-SessionStart.json":     `agent.save claude abc123`,
		"gemini-BeforeAgent.json":      `agent.save gemini g-77; checkpoint turn "add a README"`,
		"gemini-AfterTool.json":        `checkpoint tool "tool write_file"`,
		"gemini-AfterAgent.json":       `checkpoint turn "end of turn"`,
		"gemini-SessionStart.json":     `agent.save gemini g-77`,
	}
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) != len(want) {
		t.Fatalf("%d fixtures, want %d", len(files), len(want))
	}
	for _, f := range files {
		name := filepath.Base(f)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		calls, _, err := Translate(strings.SplitN(name, "-", 2)[0], b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, c := range calls {
			switch c := c.(type) {
			case api.CheckpointParams:
				got = append(got, "checkpoint "+c.Kind+" "+`"`+c.Label+`"`)
			case api.AgentSaveParams:
				var s State
				if err := json.Unmarshal(c.Data, &s); err != nil || s.TranscriptPath == "" {
					t.Errorf("%s: state %s: %v", name, c.Data, err)
				}
				got = append(got, "agent.save "+c.Name+" "+s.SessionID)
			default:
				t.Fatalf("%s: unexpected call %s", name, c.Method())
			}
		}
		if g := strings.Join(got, "; "); g != want[name] {
			t.Errorf("%s: got %s, want %s", name, g, want[name])
		}
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
