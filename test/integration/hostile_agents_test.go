package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// TestHostileNamesEscaped: a file named with ESC sequences and a newline
// (anyone who can write in the workspace can make one), and a process
// whose comm carries an ESC, must not reach the terminal raw through the
// human outputs of log --wal, diff, rewind's change list, restore and the
// error lines: each is shown escaped, so it cannot clear the screen or
// forge a line. --json keeps the exact name.
func TestHostileNamesEscaped(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	evil := "x\x1b[2J\x1b[H\nseq 1 forged\u009b1m\u202e"
	writeFile(t, filepath.Join(m.Dir, "keep.txt"), []byte("a\n"), 0o644)
	if r := m.Run("checkpoint", "--dir", m.Dir, "-m", "before"); r.Code != 0 {
		t.Fatalf("checkpoint: %d %s", r.Code, r.Stderr)
	}
	writeFile(t, filepath.Join(m.Dir, evil), []byte("b\n"), 0o644)
	// A process renames itself (comm) with an ESC and writes.
	sh(t, m.Dir, nil, `exec python3 -c 'import ctypes;ctypes.CDLL(None).prctl(15,b"w\x1b]0;pwn\x07",0,0,0);open("by-comm","w").write("c")' 2>/dev/null || printf c > by-comm`)
	if r := m.Run("checkpoint", "--dir", m.Dir, "-m", "after"); r.Code != 0 {
		t.Fatalf("checkpoint: %d %s", r.Code, r.Stderr)
	}
	clean := func(what string, r Result) {
		t.Helper()
		out := r.Stdout + r.Stderr
		for _, bad := range []string{"\x1b", "\u009b", "\u202e", "\x07", "\nseq 1 forged"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s prints %q raw:\n%s", what, bad, out)
			}
		}
		if !strings.Contains(out, `seq 1 forged`) {
			t.Errorf("%s does not name the file at all:\n%s", what, out)
		}
	}
	clean("log --wal", m.Run("log", "--wal", "--dir", m.Dir))
	clean("diff", m.Run("diff", "--store", m.Store, "before", "after"))
	clean("diff -p", m.Run("diff", "--store", m.Store, "before", "after", "-p"))
	clean("restore --dry-run", m.Run("restore", "--dry-run", "--from", "before", filepath.Join(m.Dir, evil)))
	clean("an error naming the path", m.Run("restore", "--from", "after", filepath.Join(m.Dir, evil, "nope")))
	clean("rewind", m.Run("rewind", "--dir", m.Dir, "before"))
	if r := m.Run("diff", "--store", m.Store, "before", "after", "--json"); !strings.Contains(r.Stdout, `x\u001b[2J\u001b[H\nseq 1 forged`) {
		t.Errorf("diff --json does not keep the exact name:\n%s", r.Stdout)
	}
}

// TestControlNewMethodsRefuseOtherUsers: every method added with the
// agents and timeline work (op log, undo/redo, branches, checkout, runs,
// agent state, version, log's paths/run/agents, subscribe) answers user
// nobody with permission_denied and nothing else, even with the socket
// opened up, and changes nothing.
func TestControlNewMethodsRefuseOtherUsers(t *testing.T) {
	hcPrivileged(t)
	base, bin := hcBase(t)
	dir := filepath.Join(base, "proj")
	writeFile(t, filepath.Join(dir, "a"), []byte("root's work"), 0o644)
	m := hcMount(t, dir, filepath.Join(base, "store"))
	for _, l := range []string{"one", "two"} {
		writeFile(t, filepath.Join(dir, "a"), []byte(l), 0o644)
		if r := m.Run("checkpoint", "-m", l, "--store", m.Store); r.Code != 0 {
			t.Fatalf("reynfs checkpoint: exit %d: %s", r.Code, r.Stderr)
		}
	}
	if r := m.Run("rewind", "one", "--store", m.Store); r.Code != 0 {
		t.Fatalf("reynfs rewind: exit %d: %s", r.Code, r.Stderr)
	}
	head, gens := hcHead(t, m)
	sock := socketOf(t, m.Store)
	client := filepath.Join(base, "client.pl")
	writeFile(t, client, []byte(hcClient), 0o644)
	if err := os.Chmod(m.Store, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	for i, call := range []string{
		`"method":"op.log","params":{}`,
		`"method":"undo","params":{}`,
		`"method":"redo","params":{}`,
		`"method":"branch.list","params":{}`,
		`"method":"branch.name","params":{"target":"2","name":"nobody"}`,
		`"method":"checkout","params":{"name":"b-3"}`,
		`"method":"version","params":{}`,
		`"method":"log","params":{"all":true,"wal":true,"paths":["a"],"run":"r1","agents":true}`,
		`"method":"runs","params":{}`,
		`"method":"run.start","params":{"pid":1,"label":"nobody"}`,
		`"method":"run.attach","params":{"pid":1}`,
		`"method":"run.exited","params":{"id":"r1","code":0}`,
		`"method":"agent.save","params":{"name":"claude","state":{"session":"x"}}`,
		`"method":"agent.list","params":{}`,
		`"method":"agent.show","params":{"name":"claude"}`,
		`"method":"subscribe","params":{}`,
		`"method":"restore","params":{"path":"a","from":"2"}`,
	} {
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,%s}`, i+1, call)
		r := nobodyExec(t, nil, "perl", client, sock, req)
		if !strings.Contains(r.Stdout, `"permission_denied"`) || strings.Count(r.Stdout, "\n") != 1 || strings.Contains(r.Stdout, `"result"`) {
			t.Errorf("nobody sending %s: answer %q (stderr %q); want permission_denied only", req, r.Stdout, r.Stderr)
		}
	}
	// The same request from root is answered: the refusals above are the
	// peer check, not a malformed request.
	root := hcRunCmd(t, exec.Command("perl", client, sock, `{"jsonrpc":"2.0","id":1,"method":"op.log","params":{}}`), 20*time.Second)
	if !strings.Contains(root.Stdout, `"result"`) {
		t.Errorf("root's op.log through the same client: %q %q; want a result", root.Stdout, root.Stderr)
	}
	for _, args := range [][]string{
		{"undo", "--store", m.Store},
		{"redo", "--store", m.Store},
		{"op", "log", "--store", m.Store},
		{"branch", "--store", m.Store},
		{"checkout", "b-3", "--store", m.Store},
		{"runs", "--store", m.Store},
		{"log", "--wal", "--store", m.Store, "--", "a"},
	} {
		r := nobodyExec(t, nil, append([]string{bin}, args...)...)
		if r.Code == 0 || r.Code == 5 || !strings.Contains(r.Stderr, "refused") || strings.Count(r.Stderr, "\n") != 1 {
			t.Errorf("as nobody: reynfs %s: exit %d, stdout %q, stderr %q; want a one-line refusal", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
		}
	}
	if h, g := hcHead(t, m); h != head || g != gens {
		t.Errorf("after nobody's calls: head seq %d, %d generations; want %d and %d (unchanged)", h, g, head, gens)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(b) != "one" {
		t.Errorf("a = %q, %v after nobody's calls; want the rewound \"one\"", b, err)
	}
	m.Unmount()
}
