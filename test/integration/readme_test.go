package integration

// The documented sessions are tests. Each console block of README.md and
// docs/*.md that follows a marker line
//
//	<!-- script: NAME.txtar -->
//
// is the transcript of testdata/readme/NAME.txtar, a testscript
// (github.com/rogpeppe/go-internal, as cmd/go tests itself) run against a
// real mount of the built binary. In a script, a line "$ COMMAND" runs
// COMMAND in bash, as a reader would type it, and its output (stdout and
// stderr together) must equal the block's output for that command once
// times, dates, hashes, pids and sizes are normalised (normaliseTranscript);
// every other line is hidden set-up or an extra check. So when a command's
// output changes, these tests fail until the documentation shows the new
// output: the README cannot drift from the binary.
//
// A marked ```sh block is a list of commands without their output (one a
// line, '#' starts a comment): each must succeed, in order, as the script's
// "$" lines run them; their output is not compared.
//
// TestReadmeScriptsInSync needs no mount: it checks that every marked block
// lists the same commands, in the same order, as its script, and that every
// script is shown somewhere. TestReadmeSessions runs the scripts.

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// readmeScripts is where the scripts of documented sessions live.
const readmeScripts = "testdata/readme"

// readmeHome is the home directory the documentation shows; a script's
// $WORK (its HOME) is printed as this.
const readmeHome = "/home/me"

// docStep is one "$ command" of a documented session and the output shown
// under it.
type docStep struct {
	file, cmd string
	line      int
	out       []string
	// noOutput: the step is a line of a ```sh block, which shows no output.
	noOutput bool
}

// markerRE finds the marker that ties a console block to its script.
var markerRE = regexp.MustCompile(`^<!--\s*script:\s*(\S+\.txtar)\s*-->\s*$`)

// docFiles are the documents whose marked blocks are checked.
func docFiles(t testing.TB) []string {
	t.Helper()
	files := []string{"../../README.md"}
	more, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, more...)
}

// documentedSessions maps a script's name (without .txtar) to the steps of
// the console block marked with it.
func documentedSessions(t testing.TB) map[string][]docStep {
	t.Helper()
	out := map[string][]docStep{}
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		name := filepath.Base(file)
		for i := 0; i < len(lines); i++ {
			m := markerRE.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			script := strings.TrimSuffix(m[1], ".txtar")
			if _, dup := out[script]; dup {
				t.Fatalf("%s:%d: script %s is shown twice", name, i+1, m[1])
			}
			var fence string
			if i+1 < len(lines) {
				fence = strings.TrimSpace(lines[i+1])
			}
			if fence != "```console" && fence != "```sh" {
				t.Fatalf("%s:%d: the marker must be followed by a ```console or ```sh block", name, i+1)
			}
			var steps []docStep
			j := i + 2
			for ; j < len(lines) && !strings.HasPrefix(lines[j], "```"); j++ {
				l := lines[j]
				if fence == "```sh" {
					if cmd := normaliseCommand(l); cmd != "" {
						steps = append(steps, docStep{file: name, line: j + 1, cmd: cmd, noOutput: true})
					}
					continue
				}
				if strings.HasPrefix(l, "$ ") {
					steps = append(steps, docStep{file: name, line: j + 1, cmd: normaliseCommand(l[2:])})
					continue
				}
				if len(steps) == 0 {
					t.Fatalf("%s:%d: output before the first '$ ' command", name, j+1)
				}
				steps[len(steps)-1].out = append(steps[len(steps)-1].out, l)
			}
			if j == len(lines) {
				t.Fatalf("%s:%d: unterminated console block", name, i+1)
			}
			out[script] = steps
			i = j
		}
	}
	return out
}

// normaliseCommand is a command as testscript hands it to the "$"
// command: a comment ('#' to the end of the line) dropped, words
// separated by one space. testscript's own quote is the single quote:
// documented commands quote with double quotes, which reach bash intact.
func normaliseCommand(s string) string {
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	return strings.Join(strings.Fields(s), " ")
}

// scriptCommands lists the "$" commands of a script, in order.
func scriptCommands(t testing.TB, path string) []string {
	t.Helper()
	cmds, err := readScriptCommands(path)
	if err != nil {
		t.Fatal(err)
	}
	return cmds
}

func readScriptCommands(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cmds []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "-- ") && strings.HasSuffix(l, " --") {
			break // the archive's files start here
		}
		l = strings.TrimSpace(strings.TrimPrefix(l, "!"))
		if strings.HasPrefix(l, "$ ") {
			cmds = append(cmds, normaliseCommand(l[2:]))
		}
	}
	return cmds, sc.Err()
}

func TestReadmeScriptsInSync(t *testing.T) {
	docs := documentedSessions(t)
	scripts, err := filepath.Glob(filepath.Join(readmeScripts, "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, path := range scripts {
		name := strings.TrimSuffix(filepath.Base(path), ".txtar")
		seen[name] = true
		steps, ok := docs[name]
		if !ok {
			t.Errorf("%s is shown nowhere: put '<!-- script: %s.txtar -->' before its console block", path, name)
			continue
		}
		cmds := scriptCommands(t, path)
		if len(cmds) == 0 {
			t.Errorf("%s has no '$ ' command", path)
		}
		for i := 0; i < len(cmds) || i < len(steps); i++ {
			switch {
			case i >= len(steps):
				t.Errorf("%s: command %d %q is not in %s's block", path, i+1, cmds[i], steps[0].file)
			case i >= len(cmds):
				t.Errorf("%s:%d: %q is not in %s", steps[i].file, steps[i].line, steps[i].cmd, path)
			case cmds[i] != steps[i].cmd:
				t.Errorf("%s:%d: shows %q where %s runs %q", steps[i].file, steps[i].line, steps[i].cmd, path, cmds[i])
			}
		}
	}
	var names []string
	for name := range docs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !seen[name] {
			t.Errorf("%s:%d: marker names %s.txtar, which is not in %s", docs[name][0].file, docs[name][0].line, name, readmeScripts)
		}
	}
}

// normalisers make a transcript comparable across runs and machines: what
// varies (a time, a duration, a hash, a pid, a size) becomes a placeholder,
// in the documented output and the real one alike. Seqs, generation ids,
// counts and texts are compared as they are.
var normalisers = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`), "DATE"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s|m|h)\b`), "DUR"},
	{regexp.MustCompile(`\b[0-9a-f]{12}\b`), "HASH"},
	{regexp.MustCompile(`\[\d+\]`), "[PID]"},
	{regexp.MustCompile(`\bpid \d+`), "pid PID"},
	{regexp.MustCompile(`\b\d+(\.\d+)? (B|KiB|MiB|GiB)\b`), "SIZE"},
	{regexp.MustCompile(`[ \t]+`), " "},
}

// normaliseTranscript applies the normalisers to each line and drops
// trailing spaces and blank lines at the end.
func normaliseTranscript(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		for _, n := range normalisers {
			l = n.re.ReplaceAllString(l, n.repl)
		}
		b.WriteString(strings.TrimRight(l, " "))
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// sessionState follows one script through its documented block.
type sessionState struct {
	steps []docStep
	next  int
	// transcript is what the block should show, for -readme-print.
	transcript strings.Builder
}

// readmePrint makes TestReadmeSessions log each session's transcript as the
// documentation should show it, instead of failing on the first difference:
// go test ./test/integration -run TestReadmeSessions -readme-print -v
var readmePrint = flag.Bool("readme-print", false, "log the documented sessions as they run now, do not compare")

// readmeUpdate is -readme-print that also writes each session that ran to
// its end into its marked console block (a comment after a '$ ' command is
// kept): go test ./test/integration -run TestReadmeSessions -args -readme-update
var readmeUpdate = flag.Bool("readme-update", false, "rewrite the documented sessions' console blocks with what the commands print now")

type sessionKey struct{}

func TestReadmeSessions(t *testing.T) {
	requireFUSE(t)
	requireTool(t, "git")
	requireTool(t, "bash")
	requireTool(t, "timeout")
	docs := documentedSessions(t)
	deadline := time.Now().Add(2 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	testscript.Run(t, testscript.Params{
		Dir:                 readmeScripts,
		Deadline:            deadline,
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			// HOME is $WORK, so the store lands in the default place
			// (~/.local/share/reynfs) and paths print as the docs show them.
			env.Setenv("HOME", env.WorkDir)
			env.Setenv("PATH", filepath.Dir(reynfsBin)+":"+os.Getenv("PATH"))
			env.Setenv("NO_COLOR", "1")
			env.Setenv("TERM", "dumb")
			env.Setenv("LC_ALL", "C")
			// Fixed identities and dates make git's hashes the same on
			// every run.
			for k, v := range map[string]string{
				"GIT_AUTHOR_NAME": "Me", "GIT_AUTHOR_EMAIL": "me@example.com",
				"GIT_COMMITTER_NAME": "Me", "GIT_COMMITTER_EMAIL": "me@example.com",
				"GIT_AUTHOR_DATE": "2026-01-01T12:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T12:00:00Z",
				"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.DevNull,
			} {
				env.Setenv(k, v)
			}
			env.Values[sessionKey{}] = &sessionState{}
			home := env.WorkDir
			env.Defer(func() { cleanupSession(env.T(), home) })
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"$": func(ts *testscript.TestScript, neg bool, args []string) {
				runDocumented(ts, neg, args, docs)
			},
		},
	})
}

// runDocumented is the "$" command: it runs the command line in bash (60 s
// at most) and compares its output with the next step of the script's
// documented block.
func runDocumented(ts *testscript.TestScript, neg bool, args []string, docs map[string][]docStep) {
	st := ts.Value(sessionKey{}).(*sessionState)
	if *readmeUpdate {
		*readmePrint = true
	}
	if st.steps == nil && *readmePrint {
		st.steps = []docStep{} // the documentation is what is printed
	}
	if st.steps == nil {
		st.steps = docs[ts.Name()]
		if len(st.steps) == 0 && !*readmePrint {
			ts.Fatalf("no documented block is marked <!-- script: %s.txtar -->", ts.Name())
		}
	}
	line := strings.Join(args, " ")
	if *readmePrint {
		st.steps = append(st.steps, docStep{cmd: line})
		if st.next == 0 {
			ts.Defer(func() {
				ts.Logf("%s.txtar as the documentation should show it:\n%s", ts.Name(), st.transcript.String())
				cmds, err := readScriptCommands(filepath.Join(readmeScripts, ts.Name()+".txtar"))
				if *readmeUpdate && err == nil && st.next == len(cmds) {
					if err := updateDocBlock(ts.Name(), st.transcript.String()); err != nil {
						ts.Logf("-readme-update: %v", err)
					}
				}
			})
		}
	}
	if st.next >= len(st.steps) {
		ts.Fatalf("$ %s: the documented block of %s ends before this command", line, ts.Name())
	}
	step := st.steps[st.next]
	st.next++
	if step.cmd != line {
		ts.Fatalf("%s:%d shows %q, the script runs %q", step.file, step.line, step.cmd, line)
	}
	// timeout(1) starts in $WORK, outside every mount, and bash goes to the
	// script's directory: were timeout's own cwd the mount, a documented
	// "cd && reynfs unmount" would find the mount busy.
	cwd := ts.MkAbs(".")
	ts.Check(ts.Chdir(ts.Getenv("WORK")))
	err := ts.Exec("timeout", "-k", "5", "60", "bash", "-c", "cd "+shellQuote(cwd)+" && { "+line+"\n} 2>&1")
	ts.Check(ts.Chdir(cwd))
	if err != nil && !neg {
		ts.Fatalf("$ %s: %v", line, err)
	}
	if err == nil && neg {
		ts.Fatalf("$ %s: succeeded, the script expects a failure", line)
	}
	out := strings.ReplaceAll(ts.ReadFile("stdout"), ts.Getenv("WORK"), readmeHome)
	if step.noOutput {
		return
	}
	if *readmePrint {
		fmt.Fprintf(&st.transcript, "$ %s\n%s", line, out)
		return
	}
	got := normaliseTranscript(strings.Split(out, "\n"))
	want := normaliseTranscript(step.out)
	if got != want {
		ts.Fatalf("%s:%d: the output of %q no longer matches the documentation.\nDocumented (normalised):\n%s\nPrinted now:\n%s\n(printed raw:\n%s)",
			step.file, step.line, line, want, got, out)
	}
}

// docMu serialises -readme-update's rewrites of a document (the scripts run
// in parallel).
var docMu sync.Mutex

// updateDocBlock replaces the console block marked with script name by
// transcript, step by step: a step whose command is unchanged keeps its
// '$ ' line (and comment), and keeps its documented output when that
// matches the new one once normalised, so an update changes only what did.
func updateDocBlock(name, transcript string) error {
	docMu.Lock()
	defer docMu.Unlock()
	files, _ := filepath.Glob("../../docs/*.md")
	for _, file := range append([]string{"../../README.md"}, files...) {
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		lines := strings.Split(string(b), "\n")
		for i := range lines {
			if m := markerRE.FindStringSubmatch(lines[i]); m == nil || m[1] != name+".txtar" ||
				i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```console" {
				continue
			}
			end := i + 2
			for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
				end++
			}
			old := splitSteps(lines[i+2 : end])
			var block []string
			for k, step := range splitSteps(strings.Split(strings.TrimRight(transcript, "\n"), "\n")) {
				if k < len(old) && normaliseCommand(old[k][0][2:]) == normaliseCommand(step[0][2:]) {
					step[0] = old[k][0]
					if normaliseTranscript(old[k][1:]) == normaliseTranscript(step[1:]) {
						step = old[k]
					}
				}
				block = append(block, step...)
			}
			lines = append(lines[:i+2], append(block, lines[end:]...)...)
			return os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644)
		}
	}
	return fmt.Errorf("no console block is marked <!-- script: %s.txtar -->", name)
}

// splitSteps cuts a console transcript into steps, each its '$ ' line
// followed by its output lines.
func splitSteps(lines []string) [][]string {
	var steps [][]string
	for _, l := range lines {
		if strings.HasPrefix(l, "$ ") || len(steps) == 0 {
			steps = append(steps, []string{l})
			continue
		}
		steps[len(steps)-1] = append(steps[len(steps)-1], l)
	}
	return steps
}

// shellQuote quotes s for bash.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// cleanupSession unmounts whatever a script mounted below its $WORK (also
// after a failure), then checks each store it made with reynfs fsck.
func cleanupSession(t testscript.T, home string) {
	env := append(os.Environ(), "HOME="+home, "XDG_DATA_HOME=")
	run := func(args ...string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, reynfsBin, args...)
		cmd.Env, cmd.Dir = env, "/"
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			return string(out) + err.Error(), -1
		}
		return string(out), 0
	}
	var problems []string
	for dir := range reynfsMounts() {
		if !strings.HasPrefix(dir, home+"/") {
			continue
		}
		if out, code := run("unmount", dir); code != 0 {
			t.Log(fmt.Sprintf("cleanup: reynfs unmount %s: exit %d: %s", dir, code, strings.TrimSpace(out)))
		}
		if isMounted(dir) {
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				problems = append(problems, fmt.Sprintf("umount -l %s: %v", dir, err))
			}
		}
	}
	stores, _ := filepath.Glob(filepath.Join(home, ".local/share/reynfs/*"))
	for _, store := range stores {
		if _, err := os.Stat(filepath.Join(store, "db")); err != nil {
			continue
		}
		// The daemon may still be exiting after its unmount: fsck says
		// "locked" (3) until it has.
		for i := 0; ; i++ {
			out, code := run("fsck", "--store", store)
			if code == 3 && i < 50 {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			if code != 0 {
				problems = append(problems, fmt.Sprintf("reynfs fsck --store %s: exit %d: %s", store, code, strings.TrimSpace(out)))
			}
			break
		}
	}
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
}
