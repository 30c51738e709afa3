package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
