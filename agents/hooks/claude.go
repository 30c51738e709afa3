package hooks

import (
	"errors"
	"fmt"
)

// claudePayload is the stdin of a Claude Code command hook
// (https://code.claude.com/docs/en/hooks, "Hook input"). Gemini CLI's hooks
// (its hooks reference) and Codex CLI's
// (openai/codex codex-rs/hooks/schema/generated/*.command.input.schema.json)
// use the same names for the fields read here; Codex adds turn_id and may
// send transcript_path as null.
type claudePayload struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	Cwd            string `json:"cwd"`
	Event          string `json:"hook_event_name"`
	Prompt         string `json:"prompt"`
	PromptID       string `json:"prompt_id"`
	TurnID         string `json:"turn_id"`
	ToolName       string `json:"tool_name"`
}

var errNoEvent = errors.New("payload has no hook_event_name")

// decodeClaudeShape reads a Claude-shaped payload and looks its event up
// in events; an event not listed is momentNone (it cuts nothing).
func decodeClaudeShape(payload []byte, events map[string]moment) (moment, *Payload, error) {
	var c claudePayload
	if err := decodeJSON(payload, &c); err != nil {
		return momentNone, nil, err
	}
	p := &Payload{
		SessionID: c.SessionID, TranscriptPath: c.TranscriptPath, Cwd: c.Cwd, Event: c.Event,
		Prompt: c.Prompt, PromptID: first(c.PromptID, c.TurnID), ToolName: c.ToolName,
	}
	if c.Event == "" {
		return momentNone, p, errNoEvent
	}
	return events[c.Event], p, nil
}

// Claude Code: PreToolUse cuts nothing, since the generation after the
// previous call already holds the tree this call starts from.
var claudeTool = tool{
	decode: func(b []byte) (moment, *Payload, error) {
		return decodeClaudeShape(b, map[string]moment{
			"SessionStart": momentStart, "UserPromptSubmit": momentPrompt,
			"PostToolUse": momentTool, "Stop": momentEnd, "SubagentStop": momentEnd,
		})
	},
	writes: named([]string{"mcp__"}, "Bash", "Write", "Edit", "MultiEdit", "NotebookEdit"),
	resume: func(s State) string {
		return fmt.Sprintf("claude --resume %s --fork-session", shellWord(s.SessionID))
	},
}

// Gemini CLI: the built-in tool names as its docs list them; MCP tools are
// named mcp__… there too.
var geminiTool = tool{
	decode: func(b []byte) (moment, *Payload, error) {
		return decodeClaudeShape(b, map[string]moment{
			"SessionStart": momentStart, "BeforeAgent": momentPrompt,
			"AfterTool": momentTool, "AfterAgent": momentEnd,
		})
	},
	writes: named([]string{"mcp__"}, "run_shell_command", "write_file", "replace"),
	resume: func(s State) string {
		// Gemini CLI 0.61 takes a session id with --resume (checked with the
		// real CLI in test/integration/agents_e2e_test.go).
		return fmt.Sprintf("gemini --resume %s", shellWord(s.SessionID))
	},
}
