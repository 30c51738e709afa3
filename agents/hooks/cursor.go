package hooks

import "fmt"

// Cursor's agent hooks (https://cursor.com/docs/hooks, "Reference"): every
// payload carries conversation_id (stable across the conversation),
// generation_id (changes with every user message), hook_event_name,
// workspace_roots and transcript_path (null when transcripts are off);
// sessionStart adds session_id (the same as conversation_id),
// beforeSubmitPrompt adds prompt, afterShellExecution command and output,
// afterMCPExecution tool_name, afterFileEdit file_path and edits, stop
// status and loop_count.
//
// Cursor also has generic preToolUse/postToolUse events that fire for every
// tool; integrate listens to the specific after-events instead (only those
// that can write exist, and listening to both kinds would cut two
// generations for one edit).
var cursorTool = tool{
	decode: decodeCursor,
	// Every after-event the hook listens to is a write: a shell command, an
	// MCP call or an edit.
	writes: func(string) bool { return true },
	resume: func(s State) string {
		return fmt.Sprintf("cursor: reopen conversation %s in Cursor (transcript %s)", s.SessionID, s.TranscriptPath)
	},
	// beforeSubmitPrompt's answer is {"continue": bool}: say go on, even
	// when the hook failed, so that a dead daemon never holds a prompt
	// back. The other events take no answer (empty stdout is valid).
	reply: func(event string) string {
		if event == "beforeSubmitPrompt" {
			return `{"continue":true}`
		}
		return ""
	},
}

type cursorPayload struct {
	ConversationID string   `json:"conversation_id"`
	SessionID      string   `json:"session_id"`
	GenerationID   string   `json:"generation_id"`
	Event          string   `json:"hook_event_name"`
	Roots          []string `json:"workspace_roots"`
	Cwd            string   `json:"cwd"`
	TranscriptPath string   `json:"transcript_path"`
	Prompt         string   `json:"prompt"`
	ToolName       string   `json:"tool_name"`
}

func decodeCursor(b []byte) (moment, *Payload, error) {
	var c cursorPayload
	if err := decodeJSON(b, &c); err != nil {
		return momentNone, nil, err
	}
	root := ""
	if len(c.Roots) > 0 {
		root = c.Roots[0]
	}
	p := &Payload{
		SessionID: first(c.ConversationID, c.SessionID), TranscriptPath: c.TranscriptPath,
		Cwd: first(c.Cwd, root), Event: c.Event, Prompt: c.Prompt, PromptID: c.GenerationID,
	}
	switch c.Event {
	case "":
		return momentNone, p, errNoEvent
	case "sessionStart":
		return momentStart, p, nil
	case "beforeSubmitPrompt":
		return momentPrompt, p, nil
	// The labels use the tool names Cursor's own matchers use.
	case "afterFileEdit":
		p.ToolName = "Write"
		return momentTool, p, nil
	case "afterShellExecution":
		p.ToolName = "Shell"
		return momentTool, p, nil
	case "afterMCPExecution":
		p.ToolName = "MCP:" + c.ToolName
		return momentTool, p, nil
	case "stop":
		return momentEnd, p, nil
	}
	return momentNone, p, nil
}
