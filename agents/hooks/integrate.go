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

// Command is the hook command integrate writes for tool.
func Command(tool string) string { return "reynfs hook " + tool }

type hookEvent struct{ event, matcher string }

// settingsShape says how one tool's JSON hook config is laid out.
type settingsShape struct {
	tool    string
	events  []hookEvent
	timeout int // seconds; 0 sets none
	// flat: each event holds the hook entries themselves ({"command": …},
	// Cursor), not matcher groups that hold them ({"hooks": [{"type":
	// "command", "command": …}]}, Claude Code and those that copied it).
	flat bool
	// version is set on a file integrate creates ({"version": 1}, Cursor's
	// examples all carry it).
	version int
}

// claudeShape: the events Claude Code's hook listens to, with the matcher
// of tool events (a PostToolUse without matcher matches nothing in some
// versions, so it says "*" explicitly).
var claudeShape = settingsShape{tool: "claude", timeout: 10, events: []hookEvent{
	{"SessionStart", ""}, {"UserPromptSubmit", ""}, {"PostToolUse", "*"}, {"Stop", ""},
}}

// geminiShape: Gemini CLI's matcher is a regex and optional; without one
// AfterTool fires for every tool and Translate keeps the writers. Its
// timeout unit is not confirmed, so none is set.
var geminiShape = settingsShape{tool: "gemini", events: []hookEvent{
	{"SessionStart", ""}, {"BeforeAgent", ""}, {"AfterTool", ""}, {"AfterAgent", ""},
}}

// codexShape: .codex/hooks.json, Claude Code's shape. Codex's matcher is a
// regex where "*" is not valid, and a group without one matches every tool
// (openai/codex codex-rs/config MatcherGroup: "None means all"); timeout is
// in seconds.
var codexShape = settingsShape{tool: "codex", timeout: 10, events: []hookEvent{
	{"SessionStart", ""}, {"UserPromptSubmit", ""}, {"PostToolUse", ""}, {"Stop", ""},
}}

// openhandsShape: .openhands/hooks.json, Claude Code's shape; a group
// without matcher matches every tool ("*" is the default, config.py), and
// timeout is in seconds (default 60).
var openhandsShape = settingsShape{tool: "openhands", timeout: 10, events: []hookEvent{
	{"SessionStart", ""}, {"UserPromptSubmit", ""}, {"PostToolUse", ""}, {"Stop", ""},
}}

// cursorShape: .cursor/hooks.json, {"version": 1, "hooks": {event:
// [{"command", "timeout"}]}} with timeout in seconds
// (https://cursor.com/docs/hooks, "Configuration").
var cursorShape = settingsShape{tool: "cursor", timeout: 10, flat: true, version: 1, events: []hookEvent{
	{"sessionStart", ""}, {"beforeSubmitPrompt", ""}, {"afterFileEdit", ""},
	{"afterShellExecution", ""}, {"afterMCPExecution", ""}, {"stop", ""},
}}

// claudeEvents and geminiEvents name the events of the shapes above for
// tests.
var (
	claudeEvents = claudeShape.events
	geminiEvents = geminiShape.events
)

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

// ours says whether an entry of an event's list is the one integrate
// added: a matcher group holding only our command, or (flat) our command.
func ours(raw json.RawMessage, command string, flat bool) bool {
	if flat {
		var h struct{ Command string }
		return json.Unmarshal(raw, &h) == nil && h.Command == command
	}
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
	return integrateSettings(claudeShape, settings, remove)
}

// IntegrateGemini is IntegrateClaude for Gemini CLI's .gemini/settings.json.
func IntegrateGemini(settings []byte, remove bool) ([]byte, error) {
	return integrateSettings(geminiShape, settings, remove)
}

// IntegrateCodex is IntegrateClaude for Codex CLI's .codex/hooks.json.
func IntegrateCodex(settings []byte, remove bool) ([]byte, error) {
	return integrateSettings(codexShape, settings, remove)
}

// IntegrateCursor is IntegrateClaude for Cursor's .cursor/hooks.json. A
// file it creates starts with "version": 1, which --remove leaves.
func IntegrateCursor(settings []byte, remove bool) ([]byte, error) {
	return integrateSettings(cursorShape, settings, remove)
}

// IntegrateOpenHands is IntegrateClaude for OpenHands's
// .openhands/hooks.json.
func IntegrateOpenHands(settings []byte, remove bool) ([]byte, error) {
	return integrateSettings(openhandsShape, settings, remove)
}

func integrateSettings(sh settingsShape, settings []byte, remove bool) ([]byte, error) {
	tool, command := sh.tool, Command(sh.tool)
	if len(bytes.TrimSpace(settings)) == 0 {
		settings = []byte("{}\n")
		if sh.version > 0 && !remove {
			settings = []byte(fmt.Sprintf("{\n  \"version\": %d\n}\n", sh.version))
		}
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
	for _, ev := range sh.events {
		var groups []json.RawMessage
		ei := find(hooks, ev.event)
		if ei >= 0 {
			if err := json.Unmarshal(hooks[ei].raw, &groups); err != nil {
				return nil, fmt.Errorf("integrate %s: settings hooks.%s: %v", tool, ev.event, err)
			}
		}
		kept := groups[:0:0]
		for _, g := range groups {
			if !ours(g, command, sh.flat) {
				kept = append(kept, g)
			}
		}
		if !remove {
			if len(kept) < len(groups) {
				continue // already there: leave it, bytes and all
			}
			kept = append(kept, entry(sh, ev, ind))
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

// entry is the JSON integrate adds to one event's list, indented to sit at
// depth 3 of the file.
func entry(sh settingsShape, ev hookEvent, ind string) json.RawMessage {
	h := map[string]any{"command": Command(sh.tool)}
	if !sh.flat {
		h["type"] = "command"
	}
	if sh.timeout > 0 {
		h["timeout"] = sh.timeout
	}
	var v any = h
	if !sh.flat {
		g := map[string]any{"hooks": []map[string]any{h}}
		if ev.matcher != "" {
			g["matcher"] = ev.matcher
		}
		v = g
	}
	b, _ := json.MarshalIndent(v, strings.Repeat(ind, 3), ind)
	return b
}
