package integration

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIntegrateRefusesPlantedLinks: someone who can write in the project
// plants a symlink where integrate writes (.claude -> a directory outside,
// settings.json -> a file outside, .git -> another repository, a Cline hook
// -> a file outside). integrate, often run as root, must refuse with one
// line naming the link, and leave what the link points at untouched.
func TestIntegrateRefusesPlantedLinks(t *testing.T) {
	env := testEnv(t)
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	writeFile(t, victim, []byte("{}\n"), 0o644)
	cases := []struct {
		tool, link, target string
	}{
		{"claude", ".claude", outside},
		{"gemini", ".gemini/settings.json", victim},
		{"codex", ".codex/hooks.json", victim},
		{"cursor", ".cursor", outside},
		{"openhands", ".openhands/hooks.json", victim},
		{"cline", ".clinerules", outside},
		{"cline", ".clinerules/hooks/UserPromptSubmit", victim},
		{"aider", ".git", outside},
		{"aider", ".git/hooks", outside},
	}
	for _, c := range cases {
		for _, remove := range []bool{false, true} {
			dir := t.TempDir()
			link := filepath.Join(dir, c.link)
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if c.tool == "aider" && c.link != ".git" {
				os.MkdirAll(filepath.Join(dir, ".git"), 0o755)
			}
			if err := os.Symlink(c.target, link); err != nil {
				t.Fatal(err)
			}
			args := []string{"integrate", c.tool, "--dir", dir}
			if remove {
				args = append(args, "--remove")
			}
			r := runReynfs(env, args...)
			if c.link == ".clinerules/hooks/UserPromptSubmit" || strings.HasSuffix(c.link, ".json") || !remove {
				if r.Code == 0 || strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, link+" is a symlink") {
					t.Errorf("%v with %s -> %s: exit %d, stderr %q; want a refusal naming the link", args, c.link, c.target, r.Code, r.Stderr)
				}
			}
			if b, err := os.ReadFile(victim); err != nil || string(b) != "{}\n" {
				t.Errorf("%v changed %s through %s: %q %v", args, victim, c.link, b, err)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 1 {
				t.Errorf("%v wrote into %s through %s: %d entries", args, outside, c.link, len(ents))
			}
			if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("%v replaced the link %s: %v", args, c.link, err)
			}
		}
	}
}

// TestHookStdinBounded: an agent CLI waits for its hook, so 'reynfs hook'
// must exit 0 (with the tool's required reply) within its two-second
// budget whatever is on stdin: a pipe never closed, or an endless stream.
func TestHookStdinBounded(t *testing.T) {
	env := testEnv(t)
	for _, feed := range []string{"never closed", "endless"} {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		cmd := exec.CommandContext(ctx, reynfsBin, "hook", "cline", "--store", t.TempDir())
		cmd.Env, cmd.Dir = env, t.TempDir()
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		var w *os.File
		if feed == "never closed" {
			r, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdin, w = r, pw
			defer r.Close()
		} else {
			zero, err := os.Open("/dev/zero")
			if err != nil {
				t.Fatal(err)
			}
			defer zero.Close()
			cmd.Stdin = zero
		}
		start := time.Now()
		err := cmd.Run()
		took, killed := time.Since(start), ctx.Err()
		cancel()
		if w != nil {
			w.Close()
		}
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee) || err != nil || killed != nil:
			t.Errorf("hook with stdin %s: %v after %s (stderr %q); want exit 0", feed, err, took, se.String())
		case took > 5*time.Second:
			t.Errorf("hook with stdin %s took %s; want within its 2s budget", feed, took)
		case so.String() != "{\"cancel\":false}\n" || strings.Count(se.String(), "\n") != 1:
			t.Errorf("hook with stdin %s: stdout %q stderr %q; want cline's reply and one line", feed, so.String(), se.String())
		}
	}
}
