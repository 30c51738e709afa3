package hooks

import "fmt"

// OpenHands (its agent SDK, OpenHands/software-agent-sdk
// openhands-sdk/openhands/sdk/hooks): hooks are read from
// .openhands/hooks.json in the working directory (else ~/.openhands/), in
// Claude Code's shape ({"hooks": {EVENT: [{"matcher", "hooks": [{"type":
// "command", "command", "timeout"}]}]}}, config.py). Events: PreToolUse,
// PostToolUse, UserPromptSubmit, SessionStart, SessionEnd, Stop,
// Notification (types.py). The stdin is a HookEvent (types.py): event_type,
// tool_name, tool_input, tool_output, message (the user's prompt),
// session_id, working_dir, metadata. stdout is parsed as JSON only when
// there is some (executor.py): an empty answer lets the agent go on.
var openhandsTool = tool{
	decode: decodeOpenHands,
	// The SDK's tools that can change files: terminal (execute_bash in
	// older versions), file_editor (str_replace_editor before), apply_patch.
	// MCP tools keep their own names there, so they cannot be told apart.
	writes: named(nil, "terminal", "execute_bash", "bash", "file_editor", "str_replace_editor", "apply_patch"),
	resume: func(s State) string {
		return fmt.Sprintf("openhands: resume conversation %s", s.SessionID)
	},
}

type openhandsPayload struct {
	Event      string `json:"event_type"`
	ToolName   string `json:"tool_name"`
	Message    string `json:"message"`
	SessionID  string `json:"session_id"`
	WorkingDir string `json:"working_dir"`
}

func decodeOpenHands(b []byte) (moment, *Payload, error) {
	var o openhandsPayload
	if err := decodeJSON(b, &o); err != nil {
		return momentNone, nil, err
	}
	p := &Payload{SessionID: o.SessionID, Cwd: o.WorkingDir, Event: o.Event, Prompt: o.Message, ToolName: o.ToolName}
	switch o.Event {
	case "":
		return momentNone, p, fmt.Errorf("payload has no event_type")
	case "SessionStart":
		return momentStart, p, nil
	case "UserPromptSubmit":
		return momentPrompt, p, nil
	case "PostToolUse":
		return momentTool, p, nil
	case "Stop":
		return momentEnd, p, nil
	}
	return momentNone, p, nil
}
