// Package hooks turns the hook payloads of agent CLIs (Claude Code, Codex
// CLI, Gemini CLI, Cursor, Cline, OpenHands) into control API calls, so
// that every prompt, every tool call that can write and every end of turn
// is a generation, and the agent's conversation can be resumed at the point
// a rewind goes back to. It only translates: the caller makes the calls,
// bounded in time, and never blocks the agent (a hook that fails must not
// stop its turn).
//
// Each tool has its own file (claude.go, codex.go, cursor.go, cline.go,
// openhands.go) that decodes the tool's payload into a moment of the turn
// and a normalised Payload, citing where the format comes from. What a
// moment turns into is decided here, once, so that every tool cuts the
// same generations:
//
//	session start      agent.save of State
//	before a prompt    agent.save of State, then a generation of kind turn
//	                   labelled with the prompt's first line (the state is
//	                   saved first so that generation holds it)
//	after a writer     a generation of kind tool labelled "tool NAME"
//	end of a turn      a generation of kind turn labelled "end of turn"
//
// A few tools want an answer on stdout even when the hook has nothing to
// say (Cursor's beforeSubmitPrompt, every Cline hook); Reply gives it.
package hooks

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/reynfs/reynfs/agents/api"
)

// KindTool is the generation kind cut after a tool call that can write.
const KindTool = "tool"

// maxLabel bounds a prompt's label: the first line is enough to find the
// turn again in 'reynfs log', and a pasted file must not become a label.
const maxLabel = 72

// Payload is what the hooks read from any tool's payload, under one set of
// names (each tool's file maps its own field names onto these).
type Payload struct {
	SessionID      string
	TranscriptPath string
	Cwd            string
	Event          string
	Prompt         string
	PromptID       string
	ToolName       string
}

// State is what resuming the agent's conversation needs, saved as the
// agent's state at each prompt: a rewind to that generation reads it back.
type State struct {
	Tool           string `json:"tool"`
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path,omitempty"`
	PromptID       string `json:"prompt_id,omitempty"`
	Cwd            string `json:"cwd,omitempty"`
}

// moment is the point of an agent's turn one hook event stands for.
type moment int

const (
	momentNone   moment = iota // an event the hooks take nothing from
	momentStart                // a session starts or resumes
	momentPrompt               // a user prompt is about to be sent
	momentTool                 // a tool call has finished (Payload.ToolName)
	momentEnd                  // the agent's turn has ended
	momentSaved                // the turn has ended, and only now is the session known (Codex notify)
)

// tool is one agent CLI: how its payload decodes and which of its tools
// can write.
type tool struct {
	decode func(payload []byte) (moment, *Payload, error)
	// writes says whether a tool call of this name can change files. A
	// tool that only reads (Read, Grep, WebFetch…) cuts no generation:
	// there is nothing to take back.
	writes func(name string) bool
	// resume says how to bring the conversation back ("" when unknown).
	resume func(s State) string
	// reply is what stdout must carry for event ("" for nothing); event is
	// "" when the payload could not be read.
	reply func(event string) string
}

// Tools lists the tools whose hooks are understood, in the order 'reynfs
// rewind' asks for their saved states.
var Tools = []string{"claude", "codex", "gemini", "cursor", "cline", "openhands"}

var tools = map[string]tool{
	"claude":    claudeTool,
	"codex":     codexTool,
	"gemini":    geminiTool,
	"cursor":    cursorTool,
	"cline":     clineTool,
	"openhands": openhandsTool,
}

// Translate reads one hook payload of tool and returns the calls to make,
// in order (none for an event that needs none), and the payload read (nil
// when it could not be). Its error is one line.
func Translate(name string, payload []byte) ([]api.Params, *Payload, error) {
	t, ok := tools[name]
	if !ok {
		return nil, nil, fmt.Errorf("hook: unknown tool %q: want %s", name, strings.Join(Tools, ", "))
	}
	m, p, err := t.decode(payload)
	if err != nil {
		return nil, p, fmt.Errorf("hook %s: %v", name, err)
	}
	switch m {
	case momentStart:
		if p.SessionID == "" {
			return nil, p, nil
		}
		return []api.Params{saveState(name, p)}, p, nil
	case momentPrompt:
		// The state first: the generation then holds it, so a rewind to
		// this turn finds the session to resume.
		var calls []api.Params
		if p.SessionID != "" {
			calls = append(calls, saveState(name, p))
		}
		return append(calls, api.CheckpointParams{Kind: "turn", Label: Label(p.Prompt), Unique: true}), p, nil
	case momentTool:
		if !t.writes(p.ToolName) {
			return nil, p, nil
		}
		return []api.Params{api.CheckpointParams{Kind: KindTool, Label: "tool " + p.ToolName, Unique: true}}, p, nil
	case momentEnd, momentSaved:
		var calls []api.Params
		if m == momentSaved && p.SessionID != "" {
			calls = append(calls, saveState(name, p))
		}
		return append(calls, api.CheckpointParams{Kind: "turn", Label: "end of turn", Unique: true}), p, nil
	}
	return nil, p, nil
}

// Reply is what 'reynfs hook TOOL' prints on stdout for the payload p (nil
// when it could not be read), whatever happened to the calls: the tools
// that parse an answer must get one that lets the agent go on.
func Reply(name string, p *Payload) string {
	t, ok := tools[name]
	if !ok || t.reply == nil {
		return ""
	}
	ev := ""
	if p != nil {
		ev = p.Event
	}
	return t.reply(ev)
}

func saveState(tool string, p *Payload) api.Params {
	b, _ := json.Marshal(State{Tool: tool, SessionID: p.SessionID, TranscriptPath: p.TranscriptPath, PromptID: p.PromptID, Cwd: p.Cwd})
	return api.AgentSaveParams{Name: tool, Data: b}
}

// Label is the first non-empty line of prompt, cut at maxLabel runes.
func Label(prompt string) string {
	for _, l := range strings.Split(prompt, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if r := []rune(l); len(r) > maxLabel {
			return string(r[:maxLabel-1]) + "…"
		}
		return l
	}
	return "prompt"
}

// Resume says how to bring a tool's conversation back to the point state
// was saved at ("" when not known).
func Resume(state []byte) string {
	var s State
	if json.Unmarshal(state, &s) != nil || s.SessionID == "" {
		return ""
	}
	if t, ok := tools[s.Tool]; ok && t.resume != nil {
		return t.resume(s)
	}
	return ""
}

// named returns a writes func for a fixed set of tool names, plus every
// name that starts with one of prefixes (MCP tools may write anything).
func named(prefixes []string, names ...string) func(string) bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return func(name string) bool {
		if set[name] {
			return true
		}
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
}

// decodeJSON unmarshals a payload with a one-line error.
func decodeJSON(payload []byte, v any) error {
	if err := json.Unmarshal(payload, v); err != nil {
		return fmt.Errorf("decode payload: %v", err)
	}
	return nil
}

// first returns the first non-empty string of ss.
func first(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// shellWord returns s as one shell word for a resume line the user may
// paste into a shell: as is when it is made of characters no shell
// treats specially (session ids are UUIDs and the like), else in single
// quotes. The id comes from the agent's hook payload: a crafted one such
// as "x; rm -rf ~" or "$(…)" must stay an argument when pasted.
func shellWord(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:@%+=,/", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
