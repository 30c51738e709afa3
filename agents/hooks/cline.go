package hooks

import (
	"errors"
	"fmt"
)

// Cline's hooks (cline/cline .clinerules/hooks/README.md, and
// https://docs.cline.bot/features/hooks/hook-reference) are executable
// files named after the event (TaskStart, TaskResume, TaskCancel,
// TaskComplete, UserPromptSubmit, PreToolUse, PostToolUse, PreCompact; the
// CLI adds TaskError and SessionShutdown) in .clinerules/hooks/ of the
// workspace, enabled by the "Enable Hooks" setting in VS Code. Each reads
// one JSON object on stdin: clineVersion, hookName, timestamp, taskId,
// workspaceRoots, userId, and one object named after the hook
// (userPromptSubmit.prompt, postToolUse.toolName, taskStart.taskMetadata…).
// Each must answer with JSON on stdout, {"cancel": false} to let the task
// go on.
//
// The Cline CLI (npm cline 3.0.65, run here against a scripted endpoint)
// runs the same files with the same objects, but its hookName is the SDK's
// name for the event (agent_start for TaskStart, tool_result for
// PostToolUse…, @cline/core's table), it adds sessionContext.rootSessionId
// (the id 'cline --id' resumes), it sends no UserPromptSubmit for the
// task's first prompt, and its tools are named differently (editor,
// run_commands). Both are read.
var clineTool = tool{
	decode: decodeCline,
	// The tools that can change files: the VS Code extension's
	// execute_command, write_to_file, replace_in_file, apply_patch, new_rule
	// (it writes a rule file) and use_mcp_tool (cline/cline
	// src/shared/tools.ts, ClineDefaultTool), and the CLI's editor and
	// run_commands.
	writes: named(nil, "execute_command", "write_to_file", "replace_in_file", "apply_patch", "new_rule", "use_mcp_tool",
		"editor", "run_commands"),
	resume: func(s State) string {
		return fmt.Sprintf("cline --id %s (Cline CLI; in VS Code, reopen the task from its history)", shellWord(s.SessionID))
	},
	// Every Cline hook answers, even when it failed: "cancel": false lets
	// the task go on.
	reply: func(string) string { return `{"cancel":false}` },
}

// clineEvents maps both spellings of each event onto the file's name
// (@cline/core: TaskStart→agent_start, TaskResume→agent_resume,
// TaskCancel→agent_abort, TaskComplete→agent_end, TaskError→agent_error,
// PreToolUse→tool_call, PostToolUse→tool_result,
// UserPromptSubmit→prompt_submit, SessionShutdown→session_shutdown).
var clineEvents = map[string]string{
	"agent_start": "TaskStart", "agent_resume": "TaskResume", "agent_abort": "TaskCancel",
	"agent_end": "TaskComplete", "agent_error": "TaskError", "tool_call": "PreToolUse",
	"tool_result": "PostToolUse", "prompt_submit": "UserPromptSubmit", "session_shutdown": "SessionShutdown",
}

type clineMeta struct {
	TaskMetadata struct {
		ULID        string `json:"ulid"`
		InitialTask string `json:"initialTask"`
	} `json:"taskMetadata"`
}

type clinePayload struct {
	Hook    string   `json:"hookName"`
	TaskID  string   `json:"taskId"`
	Roots   []string `json:"workspaceRoots"`
	Context struct {
		RootSessionID string `json:"rootSessionId"`
	} `json:"sessionContext"`
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
	p := &Payload{
		SessionID: first(c.Context.RootSessionID, c.TaskID), Event: c.Hook,
		Prompt: c.PromptSubmit.Prompt, ToolName: c.PostToolUse.ToolName,
	}
	if c.Context.RootSessionID != "" {
		p.PromptID = c.TaskID
	}
	if len(c.Roots) > 0 {
		p.Cwd = c.Roots[0]
	}
	ev := c.Hook
	if e, ok := clineEvents[ev]; ok {
		ev = e
	}
	switch ev {
	case "":
		return momentNone, p, fmt.Errorf("payload has no hookName")
	case "TaskStart":
		// A new task is a prompt (its first one): the CLI sends no
		// UserPromptSubmit for it. The VS Code extension may send one too,
		// which cuts a second generation at the same tree.
		p.PromptID = first(c.TaskStart.TaskMetadata.ULID, p.PromptID)
		p.Prompt = first(c.TaskStart.TaskMetadata.InitialTask, "new task")
		return momentPrompt, p, nil
	case "TaskResume":
		p.PromptID = first(c.TaskResume.TaskMetadata.ULID, p.PromptID)
		return momentStart, p, nil
	case "UserPromptSubmit":
		return momentPrompt, p, nil
	case "PostToolUse":
		return momentTool, p, nil
	case "TaskComplete", "TaskCancel", "TaskError":
		// A task is Cline's turn: it ends when the task completes, fails,
		// or is cancelled with work already done.
		return momentEnd, p, nil
	}
	return momentNone, p, nil
}

// ClineHooks are the hook files integrate writes in .clinerules/hooks/.
var ClineHooks = []string{"TaskStart", "TaskResume", "UserPromptSubmit", "PostToolUse", "TaskComplete", "TaskCancel", "TaskError"}

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
