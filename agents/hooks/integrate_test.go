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

// TestIntegrateShapes: Codex's, Cursor's and OpenHands's hook files get one
// entry of ours per event, in the tool's shape, next to the entries already
// there; twice is once, and --remove gives back the original bytes.
func TestIntegrateShapes(t *testing.T) {
	const other = `{
  "version": 1,
  "hooks": {
    "stop": [
      {
        "command": "./hooks/audit.sh"
      }
    ],
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "make lint"
          }
        ]
      }
    ]
  }
}
`
	for _, c := range []struct {
		sh    settingsShape
		merge func([]byte, bool) ([]byte, error)
		file  string
	}{
		{codexShape, IntegrateCodex, ".codex/hooks.json"},
		{cursorShape, IntegrateCursor, ".cursor/hooks.json"},
		{openhandsShape, IntegrateOpenHands, ".openhands/hooks.json"},
	} {
		for _, orig := range []string{other, ""} {
			once, err := c.merge([]byte(orig), false)
			if err != nil {
				t.Fatalf("%s: %v", c.sh.tool, err)
			}
			var v struct {
				Version int
				Hooks   map[string][]map[string]any
			}
			if err := json.Unmarshal(once, &v); err != nil {
				t.Fatalf("%s: merged %s is not JSON: %v\n%s", c.sh.tool, c.file, err, once)
			}
			if n := bytes.Count(once, []byte(`"`+Command(c.sh.tool)+`"`)); n != len(c.sh.events) {
				t.Errorf("%s: %d hook commands, want %d:\n%s", c.sh.tool, n, len(c.sh.events), once)
			}
			for _, ev := range c.sh.events {
				es := v.Hooks[ev.event]
				if len(es) == 0 {
					t.Fatalf("%s: no %s entry:\n%s", c.sh.tool, ev.event, once)
				}
				e := es[len(es)-1]
				if c.sh.flat {
					if e["command"] != Command(c.sh.tool) || e["timeout"] != float64(10) || e["hooks"] != nil {
						t.Errorf("%s %s: entry %v, want {command, timeout: 10}", c.sh.tool, ev.event, e)
					}
				} else if _, has := e["matcher"]; has || e["hooks"] == nil {
					t.Errorf("%s %s: group %v, want hooks and no matcher", c.sh.tool, ev.event, e)
				}
			}
			if orig == "" && c.sh.version != v.Version {
				t.Errorf("%s: new file has version %d, want %d", c.sh.tool, v.Version, c.sh.version)
			}
			if orig == other && (!strings.Contains(string(once), `"./hooks/audit.sh"`) || !strings.Contains(string(once), `"make lint"`)) {
				t.Errorf("%s: other hooks lost:\n%s", c.sh.tool, once)
			}
			if twice, _ := c.merge(once, false); !bytes.Equal(twice, once) {
				t.Errorf("%s: second integrate changed the file:\n%s", c.sh.tool, twice)
			}
			back, err := c.merge(once, true)
			want := orig
			if orig == "" {
				want = "{}\n"
				if c.sh.version > 0 {
					want = "{\n  \"version\": 1\n}\n"
				}
			}
			if err != nil || string(back) != want {
				t.Errorf("%s: remove gave (%v):\n%s\nwant:\n%s", c.sh.tool, err, back, want)
			}
		}
	}
}

func TestIntegrateClineHook(t *testing.T) {
	out, keep, err := IntegrateClineHook(nil, false, false)
	if err != nil || !keep || string(out) != ClineScript || !strings.HasPrefix(ClineScript, "#!/bin/sh\n") {
		t.Fatalf("new hook: %q %v %v", out, keep, err)
	}
	if again, keep, err := IntegrateClineHook(out, true, false); err != nil || !keep || !bytes.Equal(again, out) {
		t.Errorf("second integrate: %q %v %v", again, keep, err)
	}
	if _, keep, err := IntegrateClineHook(out, true, true); err != nil || keep {
		t.Errorf("remove of our hook kept it (%v)", err)
	}
	theirs := []byte("#!/usr/bin/env bash\necho '{\"cancel\": false}'\n")
	if got, _, err := IntegrateClineHook(theirs, true, false); err != ErrForeignHook || !bytes.Equal(got, theirs) {
		t.Errorf("integrate over a foreign hook: %v", err)
	}
	if got, keep, err := IntegrateClineHook(theirs, true, true); err != nil || !keep || !bytes.Equal(got, theirs) {
		t.Errorf("remove touched a foreign hook: %q %v %v", got, keep, err)
	}
	if _, keep, err := IntegrateClineHook(nil, false, true); err != nil || keep {
		t.Errorf("remove of a missing hook: keep %v, %v", keep, err)
	}
}
