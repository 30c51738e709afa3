package main

import (
	"os"
	"strings"
	"testing"
)

// TestUnknownCommandOrFlag: an unknown command (also under a group such
// as agent) or flag, or a wrong number of arguments, is bad input, exit
// 2, one line naming the command, with the suggestion or usage line.
func TestUnknownCommandOrFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lgo"}, `unknown command "lgo" for "reynfs"; did you mean gc or log?`},
		{[]string{"rewnid", "3"}, "did you mean rewind?"},
		{[]string{"agent", "bogus"}, `unknown command "bogus" for "reynfs agent"`},
		{[]string{"agent", "shw"}, "did you mean show?"},
		{[]string{"log", "--jsn"}, "unknown flag: --jsn; did you mean --json"},
		{[]string{"version", "extra"}, `unknown command "extra" for "reynfs version"`},
		{[]string{"log", "--bogus"}, "log: unknown flag: --bogus"},
		{[]string{"show"}, "show: missing argument (usage: reynfs show X)"},
		{[]string{"export", "g1", "d", "e"}, `export: unexpected argument "e" (usage: reynfs export X DIR)`},
		{[]string{"agent", "save"}, "agent save: missing argument (usage: reynfs agent save NAME [FILE])"},
		{[]string{"branch", "a", "b", "c"}, `branch: unexpected argument "c"`},
		{[]string{"checkpoint", "--kind", "bogus"}, `checkpoint --kind "bogus": want turn`},
		{[]string{"run", "--on-rewind", "bogus", "--", "true"}, `run --on-rewind "bogus": want kill, freeze or keep`},
		{[]string{"agent", "save", "me", "/reynfs-no-such-file.json"}, "agent save: read /reynfs-no-such-file.json: no such file or directory"},
		{[]string{"completion", "bogus"}, `unknown command "bogus" for "reynfs completion"`},
		{[]string{"log", "--graph", "--json"}, "log --graph does not take --json"},
		{[]string{"log", "--graph", "--wal"}, "log --graph does not take --wal"},
		{[]string{"log", "--graph", "--", "src"}, "log --graph does not take paths"},
	} {
		root := newRootCommand()
		root.SetArgs(c.args)
		err := root.Execute()
		if err == nil {
			t.Errorf("%q: no error", c.args)
			continue
		}
		if code := exitCode(err); code != exitUsage {
			t.Errorf("%q: exit %d, want %d (%v)", c.args, code, exitUsage, err)
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) {
			t.Errorf("%q: %q, want one line with %q", c.args, msg, c.want)
		}
	}
}

func TestColourNeverInPipes(t *testing.T) {
	f, err := createTemp(t)
	if err != nil {
		t.Fatal(err)
	}
	if colour(f) {
		t.Errorf("a file is coloured")
	}
}

func createTemp(t *testing.T) (*os.File, error) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err == nil {
		t.Cleanup(func() { f.Close() })
	}
	return f, err
}
