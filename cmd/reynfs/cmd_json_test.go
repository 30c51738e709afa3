package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// jsonExempt are the commands without --json, each for a reason: hook's
// output is the agent CLI's hook protocol, timeline is a terminal UI, api
// schema prints JSON anyway, and completion and help are cobra's.
var jsonExempt = map[string]bool{
	"reynfs hook": true, "reynfs timeline": true, "reynfs api schema": true,
	"reynfs completion": true, "reynfs help": true,
}

// TestEveryCommandHasJSON: every command that runs (not a group such as
// agent or op) takes --json, but the exempt ones.
func TestEveryCommandHasJSON(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := c.CommandPath()
		for _, e := range []string{"reynfs completion", "reynfs help"} {
			if strings.HasPrefix(path, e) {
				return
			}
		}
		if c.Runnable() && !c.HasSubCommands() && !jsonExempt[path] && c.Flags().Lookup("json") == nil && c.InheritedFlags().Lookup("json") == nil {
			t.Errorf("%s has no --json", path)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
}
