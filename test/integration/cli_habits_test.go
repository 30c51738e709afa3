package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The CLI as people use it (issue 10, "A CLI with git and jj habits").

// cliHead is the head seq, from reynfs log --json.
func cliHead(t testing.TB, m *Mount) uint64 {
	t.Helper()
	r := m.Run("log", "--store", m.Store, "--json")
	var l struct {
		Head uint64 `json:"head_seq"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &l) != nil {
		t.Fatalf("reynfs log --json: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	return l.Head
}

// TestCLISeqOne: seq 1, the store's first record (its import), is a
// retained state like any other: diff, export, the seq/1 view and a
// rewind to it work (they failed with "store holds no generation to start
// from").
func TestCLISeqOne(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("first"), 0o644)
	m := mountProject(t, dir)
	writeFile(t, filepath.Join(m.Dir, "later"), []byte("x"), 0o644)
	if r := m.Run("checkpoint", "--store", m.Store, "-m", "later"); r.Code != 0 {
		t.Fatalf("checkpoint: exit %d: %s", r.Code, r.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, ".reynfs", "seq", "1", "a")); err != nil || string(b) != "first" {
		t.Errorf(".reynfs/seq/1/a: %q, %v", b, err)
	}
	if r := m.Run("diff", "--store", m.Store, "1"); r.Code != 0 || !strings.Contains(r.Stdout, "later") {
		t.Errorf("diff 1: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	out := filepath.Join(t.TempDir(), "at1")
	if r := m.Run("export", "--store", m.Store, "1", out); r.Code != 0 {
		t.Errorf("export 1: exit %d: %s", r.Code, r.Stderr)
	} else if _, err := os.Stat(filepath.Join(out, "later")); !os.IsNotExist(err) {
		t.Errorf("export 1 has 'later': %v", err)
	}
	if r := m.Run("rewind", "--store", m.Store, "1"); r.Code != 0 {
		t.Fatalf("rewind 1: exit %d: %s", r.Code, r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "later")); !os.IsNotExist(err) {
		t.Errorf("after rewind 1, 'later' is still there: %v", err)
	}
}

// TestCLINoOpRewind: a rewind to the state the workspace is in already
// writes nothing and says so (exit 0); with --json, "already": true.
func TestCLINoOpRewind(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("0"), 0o644)
	m := mountProject(t, dir)
	writeFile(t, filepath.Join(m.Dir, "a"), []byte("1"), 0o644)
	if r := m.Run("checkpoint", "--store", m.Store, "-m", "one"); r.Code != 0 {
		t.Fatalf("checkpoint: exit %d: %s", r.Code, r.Stderr)
	}
	head := cliHead(t, m)
	// A bad target is still bad input, and the daemon still serves.
	if r := m.Run("rewind", "--store", m.Store, "nope"); r.Code != 2 || !strings.Contains(r.Stderr, "bad target") {
		t.Errorf("rewind nope: exit %d: %s; want exit 2, bad target", r.Code, r.Stderr)
	}
	r := m.Run("rewind", "--store", m.Store, "one")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "already at seq ") {
		t.Errorf("rewind to the current state: exit %d: %q %s; want 'already at seq …'", r.Code, r.Stdout, r.Stderr)
	}
	r = m.Run("rewind", "--store", m.Store, "--json", "one")
	var res struct {
		Already bool   `json:"already"`
		Reset   uint64 `json:"reset_seq"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &res) != nil || !res.Already || res.Reset != 0 {
		t.Errorf("rewind --json to the current state: exit %d: %s%s; want already true, no reset record", r.Code, r.Stdout, r.Stderr)
	}
	if h := cliHead(t, m); h != head {
		t.Errorf("no-op rewinds wrote records: head %d -> %d", head, h)
	}
	// A change since, even one not yet journaled, makes it a real rewind.
	writeFile(t, filepath.Join(m.Dir, "a"), []byte("2"), 0o644)
	if r := m.Run("rewind", "--store", m.Store, "one"); r.Code != 0 || strings.HasPrefix(r.Stdout, "already") {
		t.Errorf("rewind after a change: exit %d: %q %s", r.Code, r.Stdout, r.Stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(m.Dir, "a")); string(b) != "1" {
		t.Errorf("after the rewind a is %q, want 1", b)
	}
}

// TestCLIUnknownCommand: an unknown command or flag exits 2 with one line
// naming the nearest command or flag; no colour reaches a pipe.
func TestCLIUnknownCommand(t *testing.T) {
	env := testEnv(t)
	for args, want := range map[string]string{
		"lgo":         "did you mean gc or log?",
		"agent shw":   "did you mean show?",
		"log --jsn":   "did you mean --json",
		"rewnid 3":    "did you mean rewind?",
		"api schemaa": "did you mean schema?",
	} {
		r := runReynfs(env, strings.Fields(args)...)
		if r.Code != 2 || r.Stdout != "" || strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, want) || strings.Contains(r.Stderr, "\x1b") {
			t.Errorf("reynfs %s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", args, r.Code, r.Stdout, r.Stderr, want)
		}
	}
	r := runReynfs(env, "--version")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "reynfs ") || !strings.Contains(r.Stdout, "store format ") || !strings.Contains(r.Stdout, "API 1.") {
		t.Errorf("reynfs --version: exit %d: %q %s", r.Code, r.Stdout, r.Stderr)
	}
	r = runReynfs(env, "version", "--json")
	var v struct {
		Go          string `json:"go"`
		StoreFormat int    `json:"store_format"`
		Protocol    string `json:"protocol"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &v) != nil || v.Go == "" || v.StoreFormat == 0 || v.Protocol == "" {
		t.Errorf("reynfs version --json: exit %d: %q %s", r.Code, r.Stdout, r.Stderr)
	}
}

// TestCLIFusermountError: a mount that fusermount refuses (user nobody
// mounting on a directory of root's) names fusermount's own message, not
// go-fuse's "fusermount exited with code 256".
func TestCLIFusermountError(t *testing.T) {
	requireNobody(t)
	requireTool(t, "fusermount3")
	traversable(t, filepath.Dir(reynfsBin))
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("x"), 0o644)
	traversable(t, dir)
	home := t.TempDir()
	traversable(t, home)
	if err := os.Chown(home, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if isMounted(dir) {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		reynfsBin, "mount", dir, "--store", filepath.Join(home, "store"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_DATA_HOME=" + home}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("mount as nobody on root's directory succeeded: %s", out)
	}
	msg := string(out)
	if !strings.Contains(msg, "fusermount3: ") || strings.Contains(msg, "exited with code") || strings.Count(msg, "\n") != 1 {
		t.Errorf("mount refused by fusermount: %v: %q; want one line with fusermount3's own message", err, msg)
	}
}

// TestCLIJSON: mount, checkpoint, agent save/show, export and unmount
// print one JSON object with --json; a failure under --json is one JSON
// line on stderr with its kind and the usual exit code.
func TestCLIJSON(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("0"), 0o644)
	m := &Mount{t: t, Dir: dir, Store: filepath.Join(t.TempDir(), "store"), env: testEnv(t)}
	t.Cleanup(m.cleanup)
	one := func(what string, r Result, v any) {
		t.Helper()
		if r.Code != 0 {
			t.Fatalf("%s: exit %d: %s%s", what, r.Code, r.Stdout, r.Stderr)
		}
		dec := json.NewDecoder(strings.NewReader(r.Stdout))
		if err := dec.Decode(v); err != nil || dec.More() {
			t.Fatalf("%s: not one JSON object (%v): %q", what, err, r.Stdout)
		}
	}
	var mi struct {
		Mounted    bool   `json:"mounted"`
		Mountpoint string `json:"mountpoint"`
		Store      string `json:"store"`
	}
	one("mount --json", m.Run("mount", dir, "--store", m.Store, "--json"), &mi)
	m.pid = m.Pid()
	if !mi.Mounted || mi.Mountpoint != dir || mi.Store != m.Store {
		t.Errorf("mount --json: %+v", mi)
	}
	var cp struct {
		Gen struct {
			ID    int    `json:"id"`
			Label string `json:"label"`
		} `json:"generation"`
	}
	one("checkpoint --json", m.Run("checkpoint", "--store", m.Store, "-m", "cp", "--json"), &cp)
	if cp.Gen.ID < 2 || cp.Gen.Label != "cp" {
		t.Errorf("checkpoint --json: %+v", cp)
	}
	var seq struct {
		Seq uint64 `json:"seq"`
		Dir string `json:"dir"`
	}
	one("agent save --json", m.Run("agent", "save", "--store", m.Store, "coder", filepath.Join(dir, "a"), "--json"), &seq)
	var show struct {
		Data []byte `json:"data"`
	}
	one("agent show --json", m.Run("agent", "show", "--store", m.Store, "coder", "--json"), &show)
	if string(show.Data) != "0" {
		t.Errorf("agent show --json: data %q", show.Data)
	}
	out := filepath.Join(t.TempDir(), "x")
	one("export --json", m.Run("export", "--store", m.Store, "cp", out, "--json"), &seq)
	if seq.Seq == 0 || seq.Dir != out {
		t.Errorf("export --json: %+v", seq)
	}
	r := m.Run("rewind", "--store", m.Store, "nope", "--json")
	var e struct {
		Error struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
			Exit    int    `json:"exit"`
		} `json:"error"`
	}
	if r.Code != 2 || r.Stdout != "" || strings.Count(r.Stderr, "\n") != 1 || json.Unmarshal([]byte(r.Stderr), &e) != nil ||
		e.Error.Kind != "bad_target" || e.Error.Exit != 2 || !strings.Contains(e.Error.Message, "nope") {
		t.Errorf("rewind nope --json: exit %d, stdout %q, stderr %q; want exit 2 and one JSON error line of kind bad_target", r.Code, r.Stdout, r.Stderr)
	}
	one("unmount --json", m.Run("unmount", dir, "--store", m.Store, "--json"), &mi)
	m.waitDaemonGone()
	if mi.Mounted || mi.Mountpoint != dir || isMounted(dir) {
		t.Errorf("unmount --json: %+v, still mounted %v", mi, isMounted(dir))
	}
}

// TestCLILogPaths: log -- PATH keeps the generations that changed PATH
// (a directory with everything below it, relative to the current
// directory inside the mount), --exclude drops paths, log --wal names
// paths instead of inode numbers, diff A -- PATH keeps those changes, and
// a generation's counts are its net change (an editor's write-and-rename
// is one modified file, not an add and a remove).
func TestCLILogPaths(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "src", "a.go"), []byte("a\n"), 0o644)
	writeFile(t, filepath.Join(dir, "docs", "r.md"), []byte("r\n"), 0o644)
	m := mountProject(t, dir)
	checkpoint := func(label string) {
		t.Helper()
		if r := m.Run("checkpoint", "--store", m.Store, "-m", label); r.Code != 0 {
			t.Fatalf("checkpoint %s: exit %d: %s", label, r.Code, r.Stderr)
		}
	}
	writeFile(t, filepath.Join(m.Dir, "src", "a.go"), []byte("b\n"), 0o644)
	checkpoint("src1")
	writeFile(t, filepath.Join(m.Dir, "docs", "new.md"), []byte("n\n"), 0o644)
	writeFile(t, filepath.Join(m.Dir, "docs", "x.log"), []byte("l\n"), 0o644)
	checkpoint("docs1")
	sh(t, m.Dir, nil, "printf 'c\\n' > src/.a.go.tmp && mv src/.a.go.tmp src/a.go && mkdir src/sub && echo z > src/sub/z.go")
	checkpoint("src2")

	type gen struct {
		Label   string `json:"label"`
		Changed struct {
			Added, Modified, Removed int
		} `json:"changed"`
		Records []struct {
			Op    string   `json:"op"`
			What  string   `json:"what"`
			Paths []string `json:"paths"`
		} `json:"records"`
	}
	logOf := func(cwd string, args ...string) []gen {
		t.Helper()
		r := runIn(t, m, cwd, append([]string{"log", "--store", m.Store, "--json"}, args...)...)
		var l struct {
			Gens []gen `json:"generations"`
		}
		if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &l) != nil {
			t.Fatalf("log %q: exit %d: %s%s", args, r.Code, r.Stdout, r.Stderr)
		}
		return l.Gens
	}
	labels := func(gs []gen) string {
		var out []string
		for _, g := range gs {
			out = append(out, g.Label)
		}
		return strings.Join(out, ",")
	}
	if got := labels(logOf("/", "--", "src/")); got != "src2,src1" {
		t.Errorf("log -- src/: %s, want src2,src1", got)
	}
	if got := labels(logOf(filepath.Join(m.Dir, "src"), "--", "sub")); got != "src2" {
		t.Errorf("log -- sub (in src/): %s, want src2", got)
	}
	if got := labels(logOf("/", "--exclude", "*.md", "--", "docs")); got != "docs1" {
		t.Errorf("log --exclude '*.md' -- docs: %s, want docs1", got)
	}
	all := logOf("/")
	if len(all) < 4 || all[0].Label != "src2" || all[0].Changed.Added != 2 || all[0].Changed.Modified != 1 || all[0].Changed.Removed != 0 {
		t.Errorf("log: src2 counts %+v, want +2 (src/sub, src/sub/z.go) ~1 (src/a.go, written and renamed over) -0", all[0].Changed)
	}
	wal := logOf("/", "--wal", "--", "src/sub")
	var named []string
	for _, g := range wal {
		for _, r := range g.Records {
			named = append(named, strings.Join(r.Paths, ">"))
			if strings.Contains(r.What, "inode") {
				t.Errorf("log --wal: %s %q names an inode", r.Op, r.What)
			}
		}
	}
	if got := strings.Join(named, " "); !strings.HasPrefix(got, "src/sub src/sub/z.go src/sub/z.go") {
		t.Errorf("log --wal -- src/sub: record paths %q, want src/sub, then src/sub/z.go (create, write)", got)
	}
	r := m.Run("diff", "--store", m.Store, "src1", "--", "docs")
	if r.Code != 0 || !strings.Contains(r.Stdout, "docs/new.md") || strings.Contains(r.Stdout, "src/") {
		t.Errorf("diff src1 -- docs: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := m.Run("log", "--store", m.Store, "stray"); r.Code != 2 {
		t.Errorf("log stray: exit %d, want 2 (paths go after --)", r.Code)
	}
}

// runIn runs reynfs in directory cwd.
func runIn(t testing.TB, m *Mount, cwd string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, reynfsBin, args...)
	cmd.Env, cmd.Dir = m.env, cwd
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := Result{Stdout: so.String(), Stderr: se.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("reynfs %q: %v", args, err)
	}
	return r
}

// TestCLIRestoreDryRun: restore --dry-run lists what would change below
// the path and changes nothing; no progress indicator reaches a pipe.
func TestCLIRestoreDryRun(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "src", "a.go"), []byte("a\n"), 0o644)
	writeFile(t, filepath.Join(dir, "other"), []byte("o\n"), 0o644)
	m := mountProject(t, dir)
	if r := m.Run("checkpoint", "--store", m.Store, "-m", "base"); r.Code != 0 {
		t.Fatalf("checkpoint: exit %d: %s", r.Code, r.Stderr)
	}
	writeFile(t, filepath.Join(m.Dir, "src", "a.go"), []byte("changed\n"), 0o644)
	writeFile(t, filepath.Join(m.Dir, "src", "new.go"), []byte("n\n"), 0o644)
	writeFile(t, filepath.Join(m.Dir, "other"), []byte("x\n"), 0o644)
	head := cliHead(t, m)
	r := m.Run("restore", filepath.Join(m.Dir, "src"), "--from", "base", "--dry-run")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "would restore src from seq ") ||
		!strings.Contains(r.Stdout, "modified src/a.go") || !strings.Contains(r.Stdout, "removed  src/new.go") ||
		strings.Contains(r.Stdout, "other") || r.Stderr != "" {
		t.Errorf("restore src --dry-run: exit %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = m.Run("restore", filepath.Join(m.Dir, "src"), "--from", "base", "--dry-run", "--json")
	var res struct {
		Dry     bool `json:"dry"`
		Changes []struct {
			Path string `json:"path"`
			Kind string `json:"kind"`
		} `json:"changes"`
	}
	kinds := map[string]string{}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &res) != nil || !res.Dry {
		t.Errorf("restore --dry-run --json: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, c := range res.Changes {
		kinds[c.Path] = c.Kind
	}
	if kinds["src/a.go"] != "modified" || kinds["src/new.go"] != "removed" || kinds["other"] != "" {
		t.Errorf("restore --dry-run --json: changes %v; want src/a.go modified, src/new.go removed, nothing else outside src", kinds)
	}
	if r := m.Run("restore", filepath.Join(m.Dir, "src", "nope"), "--from", "base", "--dry-run"); r.Code != 2 {
		t.Errorf("restore of a path absent at the target --dry-run: exit %d: %s", r.Code, r.Stderr)
	}
	if h := cliHead(t, m); h != head {
		t.Errorf("dry runs wrote records: head %d -> %d", head, h)
	}
	if b, _ := os.ReadFile(filepath.Join(m.Dir, "src", "a.go")); string(b) != "changed\n" {
		t.Errorf("a dry run changed src/a.go: %q", b)
	}
}

// TestCLICompletion: the shell's completion of a target (cobra's
// __complete, as bash and zsh call it) offers the workspace's generation
// ids and labels, asked through the API.
func TestCLICompletion(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("0"), 0o644)
	m := mountProject(t, dir)
	if r := m.Run("checkpoint", "--store", m.Store, "-m", "before-refactor"); r.Code != 0 {
		t.Fatalf("checkpoint: exit %d: %s", r.Code, r.Stderr)
	}
	for _, args := range [][]string{
		{"__complete", "rewind", "--store", m.Store, "be"},
		{"__complete", "diff", "--store", m.Store, "g1", "be"},
		{"__complete", "show", "--store", m.Store, "be"},
		{"__complete", "export", "--store", m.Store, "be"},
	} {
		r := runIn(t, m, m.Dir, args...)
		if r.Code != 0 || !strings.HasPrefix(r.Stdout, "before-refactor\tg2") {
			t.Errorf("reynfs %q: exit %d: %q %s", args, r.Code, r.Stdout, r.Stderr)
		}
	}
	r := runIn(t, m, m.Dir, "__complete", "restore", "a", "--from", "g")
	if r.Code != 0 || !strings.Contains(r.Stdout, "g1\t") || !strings.Contains(r.Stdout, "g2\t") {
		t.Errorf("reynfs __complete restore a --from g: exit %d: %q %s", r.Code, r.Stdout, r.Stderr)
	}
}

// cliJSONLine checks a failure under --json: exit want, nothing on
// stdout, one JSON line {"error":{kind,message,exit}} on stderr.
func cliJSONLine(t testing.TB, r Result, want int, what string) {
	t.Helper()
	var e struct {
		Error struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
			Exit    int    `json:"exit"`
		} `json:"error"`
	}
	if r.Code != want || r.Stdout != "" || strings.Count(r.Stderr, "\n") != 1 || json.Unmarshal([]byte(r.Stderr), &e) != nil ||
		e.Error.Kind == "" || e.Error.Message == "" || e.Error.Exit != want {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, nothing on stdout, one JSON error line on stderr", what, r.Code, r.Stdout, r.Stderr, want)
	}
}
