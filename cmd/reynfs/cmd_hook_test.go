package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunHookReply replays recorded payloads through runHook with no
// daemon behind the store: the answer the tool needs on stdout is there on
// every path, the failure is one line, and an event that needs no call
// makes none (so it cannot fail).
func TestRunHookReply(t *testing.T) {
	o := storeOptions{store: t.TempDir()}
	fixture := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "agents", "hooks", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range []struct {
		args    []string
		stdin   string
		reply   string
		failing bool
	}{
		{[]string{"cursor"}, fixture("cursor-beforeSubmitPrompt.json"), `{"continue":true}`, true},
		{[]string{"cursor"}, fixture("cursor-afterFileEdit.json"), "", true},
		{[]string{"cursor"}, fixture("cursor-beforeReadFile.json"), "", false},
		{[]string{"cline"}, fixture("cline-PostToolUse-read_file.json"), `{"cancel":false}`, false},
		{[]string{"cline"}, fixture("cline-UserPromptSubmit.json"), `{"cancel":false}`, true},
		{[]string{"cline"}, "{not json", `{"cancel":false}`, true},
		{[]string{"codex", fixture("codex-notify.json")}, "", "", true},
		{[]string{"claude"}, fixture("claude-PostToolUse-Read.json"), "", false},
		{[]string{"vim"}, "{}", "", true},
		{[]string{"claude", "{}", "extra"}, "", "", true},
	} {
		reply, err := runHook(context.Background(), o, c.args, strings.NewReader(c.stdin))
		if reply != c.reply {
			t.Errorf("%v: reply %q, want %q", c.args[0], reply, c.reply)
		}
		if (err != nil) != c.failing || (err != nil && strings.Contains(err.Error(), "\n")) {
			t.Errorf("%v: error %v, want failing=%v and one line", c.args[0], err, c.failing)
		}
	}
}
