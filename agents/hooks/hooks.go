// Package hooks turns the hook payloads of agent CLIs (Claude Code, Gemini
// CLI) into control API calls, so that every prompt, every tool call that
// can write and every end of turn is a generation, and the agent's
// conversation can be resumed at the point a rewind goes back to. It only
// translates: the caller makes the calls, bounded in time, and never
// blocks the agent (a hook that fails must not stop its turn).
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

// Payload is the union of the fields the supported tools send on stdin.
// Claude Code's names are documented (settings.json hooks); Gemini CLI uses
// the same names for the fields read here.
type Payload struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	Event          string          `json:"hook_event_name"`
	Prompt         string          `json:"prompt"`
	PromptID       string          `json:"prompt_id"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
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

// Tools lists the tools whose hooks are understood.
var Tools = []string{"claude", "gemini"}

// writers are the tools' built-in tools that can change files. A tool not
// listed (Read, Grep, WebFetch…) cuts no generation: nothing to take back.
// MCP tools (mcp__…) may write anything, so they count as writers.
var writers = map[string]map[string]bool{
	"claude": {"Bash": true, "Write": true, "Edit": true, "MultiEdit": true, "NotebookEdit": true},
	// Gemini CLI's built-in tool names as its docs list them.
	"gemini": {"run_shell_command": true, "write_file": true, "replace": true},
}

// Translate reads one hook payload of tool and returns the calls to make,
// in order (none for an event that needs none). Its error is one line.
func Translate(tool string, payload []byte) ([]api.Params, *Payload, error) {
	w, ok := writers[tool]
	if !ok {
		return nil, nil, fmt.Errorf("hook: unknown tool %q: want %s", tool, strings.Join(Tools, ", "))
	}
	var p Payload
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, nil, fmt.Errorf("hook %s: decode payload: %v", tool, err)
	}
	ev := p.Event
	switch tool + "/" + ev {
	case "claude/UserPromptSubmit", "gemini/BeforeAgent":
		// The state first: the generation then holds it, so a rewind to
		// this turn finds the session to resume.
		var calls []api.Params
		if p.SessionID != "" {
			calls = append(calls, saveState(tool, &p))
		}
		calls = append(calls, api.CheckpointParams{Kind: "turn", Label: Label(p.Prompt), Unique: true})
		return calls, &p, nil
	case "claude/SessionStart", "gemini/SessionStart":
		if p.SessionID == "" {
			return nil, &p, nil
		}
		return []api.Params{saveState(tool, &p)}, &p, nil
	case "claude/PostToolUse", "gemini/AfterTool":
		if !w[p.ToolName] && !strings.HasPrefix(p.ToolName, "mcp__") {
			return nil, &p, nil
		}
		return []api.Params{api.CheckpointParams{Kind: KindTool, Label: "tool " + p.ToolName, Unique: true}}, &p, nil
	case "claude/Stop", "claude/SubagentStop", "gemini/AfterAgent":
		return []api.Params{api.CheckpointParams{Kind: "turn", Label: "end of turn", Unique: true}}, &p, nil
	case "claude/PreToolUse":
		// The generation after the previous call already holds the tree
		// this call starts from.
		return nil, &p, nil
	}
	if ev == "" {
		return nil, nil, fmt.Errorf("hook %s: payload has no hook_event_name", tool)
	}
	return nil, &p, nil
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

// Resume says how to bring tool's conversation back to the point state was
// saved at ("" when not known).
func Resume(state []byte) string {
	var s State
	if json.Unmarshal(state, &s) != nil || s.SessionID == "" {
		return ""
	}
	switch s.Tool {
	case "claude":
		return fmt.Sprintf("claude --resume %s --fork-session", s.SessionID)
	case "gemini":
		return fmt.Sprintf("gemini: resume session %s (transcript %s)", s.SessionID, s.TranscriptPath)
	}
	return ""
}
