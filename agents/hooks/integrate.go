package hooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// ClaudeCommand is the hook command integrate writes; remove takes out
// exactly the entries whose command it is, and nothing else.
const ClaudeCommand = "reynfs hook claude"

// GeminiCommand is ClaudeCommand for Gemini CLI.
const GeminiCommand = "reynfs hook gemini"

type hookEvent struct{ event, matcher string }

// claudeEvents are the Claude Code events the hook listens to, with the
// matcher of tool events (a PostToolUse without matcher matches nothing in
// some versions, so it says "*" explicitly).
var claudeEvents = []hookEvent{
	{"SessionStart", ""}, {"UserPromptSubmit", ""}, {"PostToolUse", "*"}, {"Stop", ""},
}

// geminiEvents: Gemini CLI's matcher is a regex and optional; without one
// AfterTool fires for every tool and Translate keeps the writers.
var geminiEvents = []hookEvent{
	{"SessionStart", ""}, {"BeforeAgent", ""}, {"AfterTool", ""}, {"AfterAgent", ""},
}

// member is one key of a JSON object, its value as it was written: keys
// not touched keep their order and their bytes.
type member struct {
	key string
	raw json.RawMessage
}

func parseObject(b []byte) ([]member, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var ms []member
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return nil, err
		}
		ms = append(ms, member{t.(string), raw})
	}
	if _, err := d.Token(); err != nil {
		return nil, err
	}
	return ms, nil
}

func emitObject(ms []member, depth int, ind string) []byte {
	if len(ms) == 0 {
		return []byte("{}")
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, m := range ms {
		k, _ := json.Marshal(m.key)
		b.WriteString(strings.Repeat(ind, depth+1))
		b.Write(k)
		b.WriteString(": ")
		b.Write(m.raw)
		if i < len(ms)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString(strings.Repeat(ind, depth) + "}")
	return b.Bytes()
}

func emitArray(es []json.RawMessage, depth int, ind string) []byte {
	if len(es) == 0 {
		return []byte("[]")
	}
	var b bytes.Buffer
	b.WriteString("[\n")
	for i, e := range es {
		b.WriteString(strings.Repeat(ind, depth+1))
		b.Write(e)
		if i < len(es)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString(strings.Repeat(ind, depth) + "]")
	return b.Bytes()
}

func find(ms []member, key string) int {
	for i, m := range ms {
		if m.key == key {
			return i
		}
	}
	return -1
}

// ours says whether a matcher group of Claude Code's settings is the one
// integrate added.
func ours(raw json.RawMessage, command string) bool {
	var g struct {
		Hooks []struct{ Command string } `json:"hooks"`
	}
	return json.Unmarshal(raw, &g) == nil && len(g.Hooks) == 1 && g.Hooks[0].Command == command
}

// indentOf guesses the file's indent from its second line (two spaces when
// it has none).
func indentOf(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		rest := b[i+1:]
		n := len(rest) - len(bytes.TrimLeft(rest, " \t"))
		if n > 0 {
			return string(rest[:n])
		}
	}
	return "  "
}

// IntegrateClaude returns settings (Claude Code's .claude/settings.json,
// nil when absent) with reynfs's hooks merged in (remove: taken out).
// Running it twice changes nothing; removing after adding gives back the
// original bytes when the file was indented consistently, since only the
// hooks entries integrate owns are rewritten.
func IntegrateClaude(settings []byte, remove bool) ([]byte, error) {
	return integrateSettings("claude", settings, ClaudeCommand, claudeEvents, 10, remove)
}

// IntegrateGemini is IntegrateClaude for Gemini CLI's .gemini/settings.json
// (same shape of hooks; its timeout unit is not confirmed, so none is set).
func IntegrateGemini(settings []byte, remove bool) ([]byte, error) {
	return integrateSettings("gemini", settings, GeminiCommand, geminiEvents, 0, remove)
}

func integrateSettings(tool string, settings []byte, command string, events []hookEvent, timeout int, remove bool) ([]byte, error) {
	if len(bytes.TrimSpace(settings)) == 0 {
		settings = []byte("{}\n")
	}
	top, err := parseObject(settings)
	if err != nil {
		return nil, fmt.Errorf("integrate %s: settings: %v", tool, err)
	}
	ind := indentOf(settings)
	var hooks []member
	hi := find(top, "hooks")
	if hi >= 0 {
		if hooks, err = parseObject(top[hi].raw); err != nil {
			return nil, fmt.Errorf("integrate %s: settings hooks: %v", tool, err)
		}
	}
	for _, ev := range events {
		var groups []json.RawMessage
		ei := find(hooks, ev.event)
		if ei >= 0 {
			if err := json.Unmarshal(hooks[ei].raw, &groups); err != nil {
				return nil, fmt.Errorf("integrate %s: settings hooks.%s: %v", tool, ev.event, err)
			}
		}
		kept := groups[:0:0]
		for _, g := range groups {
			if !ours(g, command) {
				kept = append(kept, g)
			}
		}
		if !remove {
			if len(kept) < len(groups) {
				continue // already there: leave it, bytes and all
			}
			h := map[string]any{"type": "command", "command": command}
			if timeout > 0 {
				h["timeout"] = timeout
			}
			g := map[string]any{"hooks": []map[string]any{h}}
			if ev.matcher != "" {
				g["matcher"] = ev.matcher
			}
			b, _ := json.MarshalIndent(g, strings.Repeat(ind, 3), ind)
			kept = append(kept, b)
		} else if len(kept) == len(groups) {
			continue
		}
		switch {
		case len(kept) == 0 && ei >= 0:
			hooks = append(hooks[:ei], hooks[ei+1:]...)
		case ei >= 0:
			hooks[ei].raw = emitArray(kept, 2, ind)
		default:
			hooks = append(hooks, member{ev.event, emitArray(kept, 2, ind)})
		}
	}
	switch {
	case len(hooks) == 0 && hi >= 0:
		top = append(top[:hi], top[hi+1:]...)
	case hi >= 0:
		top[hi].raw = emitObject(hooks, 1, ind)
	case len(hooks) > 0:
		top = append(top, member{"hooks", emitObject(hooks, 1, ind)})
	}
	out := emitObject(top, 0, ind)
	if bytes.HasSuffix(settings, []byte("\n")) {
		out = append(out, '\n')
	}
	return out, nil
}
