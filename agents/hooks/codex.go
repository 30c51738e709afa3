package hooks

import "fmt"

// Codex CLI has two ways to run a program, and 'reynfs hook codex' reads
// both:
//
//   - Hooks, Claude Code's shape (events SessionStart, UserPromptSubmit,
//     PreToolUse, PostToolUse, Stop…; JSON on stdin with session_id,
//     turn_id, transcript_path, cwd, hook_event_name, prompt, tool_name),
//     in <repo>/.codex/hooks.json or ~/.codex/hooks.json. Source: openai/codex
//     codex-rs/hooks (engine/discovery.rs loads hooks.json beside each config
//     layer; schema/generated/user-prompt-submit.command.input.schema.json
//     and post-tool-use.command.input.schema.json give the fields) and
//     https://developers.openai.com/codex/hooks. Codex runs a project's hooks
//     only once the project is trusted and each hook has been reviewed in
//     /hooks (the trust is a hash of the hook's definition, kept in the
//     user's config.toml): integrate cannot and does not grant it.
//   - notify, the older and simpler one: `notify = ["reynfs", "hook",
//     "codex"]` in config.toml runs the program at the end of every turn
//     with one more argument, {"type":"agent-turn-complete","thread-id",
//     "turn-id","cwd","input-messages","last-assistant-message"}, stdin and
//     stdout closed. Source: openai/codex codex-rs/hooks/src/legacy_notify.rs.
//
// The tool names Codex puts in tool_name: "Bash" for its shell tools,
// "apply_patch" for file edits (its hooks match it as Write and Edit too),
// and mcp__SERVER__TOOL for MCP tools (openai/codex HookToolName::bash and
// ::apply_patch).
var codexTool = tool{
	decode: decodeCodex,
	writes: named([]string{"mcp__"}, "Bash", "apply_patch"),
	resume: func(s State) string {
		if s.PromptID != "" {
			return fmt.Sprintf("codex resume %s (turn %s)", shellWord(s.SessionID), s.PromptID)
		}
		return "codex resume " + shellWord(s.SessionID)
	},
}

// codexNotify is the argument of Codex's notify program.
type codexNotify struct {
	Type     string   `json:"type"`
	Event    string   `json:"hook_event_name"` // set: a hook, not notify
	ThreadID string   `json:"thread-id"`
	TurnID   string   `json:"turn-id"`
	Cwd      string   `json:"cwd"`
	Inputs   []string `json:"input-messages"`
}

func decodeCodex(b []byte) (moment, *Payload, error) {
	var n codexNotify
	if err := decodeJSON(b, &n); err != nil {
		return momentNone, nil, err
	}
	if n.Event == "" && n.Type != "" {
		p := &Payload{SessionID: n.ThreadID, PromptID: n.TurnID, Cwd: n.Cwd, Event: n.Type}
		if n.Type != "agent-turn-complete" {
			return momentNone, p, nil
		}
		// The only call notify gets: the session is saved with the end of
		// the turn, and the next turn starts from that generation.
		return momentSaved, p, nil
	}
	return decodeClaudeShape(b, map[string]moment{
		"SessionStart": momentStart, "UserPromptSubmit": momentPrompt,
		"PostToolUse": momentTool, "Stop": momentEnd,
	})
}
