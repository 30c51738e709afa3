package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindCommand: a CMD that cannot start is refused as a shell does,
// on one line naming it, before any run is registered.
func TestFindCommand(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		code int
		want string
	}{
		{"true", 0, ""},
		{filepath.Join(dir, "missing"), 127, "command not found"},
		{"reynfs-no-such-command", 127, "command not found"},
		{plain, 126, "permission denied"},
	} {
		err := findCommand(c.name)
		if c.code == 0 {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if code := exitCode(err); code != c.code {
			t.Errorf("%s: exit %d, want %d", c.name, code, c.code)
		}
		if msg := err.Error(); msg != "run: "+c.name+": "+c.want || strings.Contains(msg, "exec") {
			t.Errorf("%s: %q", c.name, msg)
		}
	}
}
