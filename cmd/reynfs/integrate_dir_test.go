package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIntegrateMissingDir: integrate into a project directory that does
// not exist is bad input and creates nothing (it created DIR/.claude/…).
func TestIntegrateMissingDir(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo")
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ tool, dir, want string }{
		{"claude", missing, "no such directory"},
		{"gemini", missing, "no such directory"},
		{"cline", missing, "no such directory"},
		{"aider", missing, "no such directory"},
		{"codex", file, "not a directory"},
	} {
		_, err := integrate(c.tool, c.dir, false)
		if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("integrate %s --dir %s: %v (exit %d), want exit 2 %q", c.tool, c.dir, err, exitCode(err), c.want)
		}
	}
	if _, err := os.Lstat(missing); err == nil {
		t.Errorf("integrate created %s", missing)
	}
	if _, err := integrate("bogus", missing, false); err == nil || !strings.Contains(err.Error(), `integrate "bogus"`) {
		t.Errorf("unknown tool: %v", err)
	}
}
