package hooks

import (
	"errors"
	"fmt"
)

// Cline's hooks (cline/cline .clinerules/hooks/README.md, and
// https://docs.cline.bot/features/hooks/hook-reference) are executable
// files named after the event (TaskStart, TaskResume, TaskCancel,
// TaskComplete, UserPromptSubmit, PreToolUse, PostToolUse, PreCompact) in
// .clinerules/hooks/ of the workspace, enabled by the "Enable Hooks"
// setting. Each reads one JSON object on stdin: clineVersion, hookName,
// timestamp, taskId, workspaceRoots, userId, and one object named after
// the hook (userPromptSubmit.prompt, postToolUse.toolName,
// taskStart.taskMetadata.ulid…). Each must answer with JSON on stdout,
// {"cancel": false} to let the task go on.
var clineTool = tool{
	decode: decodeCline,
	// Cline's built-in tools that can change files (cline/cline
	// src/shared/tools.ts, ClineDefaultTool): execute_command, write_to_file,
	// replace_in_file, apply_patch and new_rule (it writes a rule file);
	// use_mcp_tool may write anything.
	writes: named(nil, "execute_command", "write_to_file", "replace_in_file", "apply_patch", "new_rule", "use_mcp_tool"),
	resume: func(s State) string {
		return fmt.Sprintf("cline: reopen task %s from Cline's task history", s.SessionID)
	},
	// Every Cline hook answers, even when it failed: "cancel": false lets
	// the task go on.
	reply: func(string) string { return `{"cancel":false}` },
}

type clineMeta struct {
	TaskMetadata struct {
		ULID string `json:"ulid"`
	} `json:"taskMetadata"`
}

type clinePayload struct {
	Hook         string    `json:"hookName"`
	TaskID       string    `json:"taskId"`
	Roots        []string  `json:"workspaceRoots"`
	TaskStart    clineMeta `json:"taskStart"`
	TaskResume   clineMeta `json:"taskResume"`
	PromptSubmit struct {
		Prompt string `json:"prompt"`
	} `json:"userPromptSubmit"`
	PostToolUse struct {
		ToolName string `json:"toolName"`
	} `json:"postToolUse"`
}

func decodeCline(b []byte) (moment, *Payload, error) {
	var c clinePayload
	if err := decodeJSON(b, &c); err != nil {
		return momentNone, nil, err
	}
	p := &Payload{SessionID: c.TaskID, Event: c.Hook, Prompt: c.PromptSubmit.Prompt, ToolName: c.PostToolUse.ToolName}
	if len(c.Roots) > 0 {
		p.Cwd = c.Roots[0]
	}
	switch c.Hook {
	case "":
		return momentNone, p, fmt.Errorf("payload has no hookName")
	case "TaskStart", "TaskResume":
		p.PromptID = first(c.TaskStart.TaskMetadata.ULID, c.TaskResume.TaskMetadata.ULID)
		return momentStart, p, nil
	case "UserPromptSubmit":
		return momentPrompt, p, nil
	case "PostToolUse":
		return momentTool, p, nil
	case "TaskComplete", "TaskCancel":
		// A task is Cline's turn: it ends when the task completes, or when
		// it is cancelled with work already done.
		return momentEnd, p, nil
	}
	return momentNone, p, nil
}

// ClineHooks are the hook files integrate writes in .clinerules/hooks/.
var ClineHooks = []string{"TaskStart", "TaskResume", "UserPromptSubmit", "PostToolUse", "TaskComplete", "TaskCancel"}

// ClineScript is each of those files: Cline runs the file itself (its
// shebang), with the payload on stdin; 'reynfs hook cline' answers for it.
const ClineScript = `#!/bin/sh
# reynfs integrate cline: this event cuts a reynfs generation (docs/agents.md).
exec reynfs hook cline
`

// ErrForeignHook is returned by IntegrateClineHook for a hook file that is
// there and is not the one integrate writes: Cline runs one file per
// event, and integrate will not replace or edit someone else's.
var ErrForeignHook = errors.New("exists and is not reynfs's (add 'reynfs hook cline' to it by hand, see docs/agents.md)")

// IntegrateClineHook says what becomes of one hook file, given its content
// and whether it existed: the content to write (keep) or that the file
// should go (!keep). Adding twice changes nothing; remove deletes only a
// file that is exactly ClineScript.
func IntegrateClineHook(content []byte, existed, remove bool) (out []byte, keep bool, err error) {
	mine := existed && string(content) == ClineScript
	switch {
	case remove && mine:
		return nil, false, nil
	case remove || mine:
		return content, existed, nil
	case existed:
		return content, true, ErrForeignHook
	}
	return []byte(ClineScript), true, nil
}
