package hooks

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

const settings = `{
  "model": "opus",
  "permissions": {
    "allow": [
      "Bash(go test:*)"
    ]
  },
  "hooks": {
    "PostToolUse": [
      {
        "matcher": "Write",
        "hooks": [
          {
            "type": "command",
            "command": "gofmt -w ."
          }
        ]
      }
    ]
  }
}
`

func TestIntegrateGemini(t *testing.T) {
	once, err := IntegrateGemini([]byte(settings), false)
	if err != nil || bytes.Count(once, []byte(GeminiCommand)) != len(geminiEvents) || bytes.Contains(once, []byte(ClaudeCommand)) {
		t.Fatalf("integrate gemini (%v):\n%s", err, once)
	}
	if twice, _ := IntegrateGemini(once, false); !bytes.Equal(twice, once) {
		t.Errorf("second integrate changed the file:\n%s", twice)
	}
	if back, _ := IntegrateGemini(once, true); string(back) != settings {
		t.Errorf("remove did not give back the original:\n%s", back)
	}
}

func TestIntegrateClaude(t *testing.T) {
	for _, orig := range []string{settings, "{\n\t\"model\": \"opus\"\n}\n", ""} {
		once, err := IntegrateClaude([]byte(orig), false)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Model string
			Hooks map[string][]json.RawMessage
		}
		if err := json.Unmarshal(once, &v); err != nil {
			t.Fatalf("merged settings are not JSON: %v\n%s", err, once)
		}
		for _, ev := range claudeEvents {
			if n := bytes.Count(once, []byte(ClaudeCommand)); n != len(claudeEvents) || len(v.Hooks[ev.event]) == 0 {
				t.Fatalf("%s: %d hook commands:\n%s", ev.event, n, once)
			}
		}
		if orig == settings && (v.Model != "opus" || len(v.Hooks["PostToolUse"]) != 2 || !strings.Contains(string(once), `"gofmt -w ."`)) {
			t.Errorf("other content lost:\n%s", once)
		}
		twice, err := IntegrateClaude(once, false)
		if err != nil || !bytes.Equal(once, twice) {
			t.Errorf("second integrate changed the file (%v):\n%s\n---\n%s", err, once, twice)
		}
		back, err := IntegrateClaude(twice, true)
		if err != nil {
			t.Fatal(err)
		}
		want := orig
		if orig == "" {
			want = "{}\n"
		}
		if string(back) != want {
			t.Errorf("remove did not give back the original:\n%s\n---\n%s", back, want)
		}
	}
	if _, err := IntegrateClaude([]byte(`[1]`), false); err == nil {
		t.Error("an array accepted as settings")
	}
}
