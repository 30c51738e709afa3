package integration

// The control plane as a hostile local user sees it (issue 8 items 2 and
// 3; DESIGN invariant 10): user nobody must not drive root's daemon, nor
// answer in its place; the socket and the store are private whatever the
// umask, and nothing in the store is written through a symlink. Signals,
// dead daemons and overlaps are in control_signals_test.go.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const nobody = 65534

// hcPrivileged skips (fails in CI) unless this test can act as user
// nobody: root, setpriv and perl (perl-base, for a raw socket client and
// a fake server).
func hcPrivileged(t *testing.T) {
	t.Helper()
	requireFUSE(t)
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root to act as user nobody")
	}
	requireTool(t, "setpriv")
	requireTool(t, "perl")
}

// hcBase makes a directory user nobody can traverse (t.TempDir() lies
// under the run's 0700 root), with a copy of the binary nobody can run.
func hcBase(t *testing.T) (base, bin string) {
	t.Helper()
	base, err := os.MkdirTemp("/tmp", "reynfs-hostile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(reynfsBin)
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(base, "reynfs")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return base, bin
}

// hcMount mounts dir with its store at store (outside t.TempDir()).
func hcMount(t *testing.T, dir, store string) *Mount {
	t.Helper()
	m := &Mount{t: t, Dir: dir, Store: store, env: testEnv(t)}
	t.Cleanup(m.cleanup)
	m.Mount()
	return m
}

// nobodyExec runs argv as user nobody, bounded to 20 s.
func nobodyExec(t *testing.T, env []string, argv ...string) Result {
	t.Helper()
	cmd := exec.Command("setpriv", append([]string{"--reuid=" + strconv.Itoa(nobody), "--regid=" + strconv.Itoa(nobody), "--clear-groups"}, argv...)...)
	cmd.Dir = "/"
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}, env...)
	return hcRunCmd(t, cmd, 20*time.Second)
}

// hcRunCmd runs cmd, killing it after limit.
func hcRunCmd(t *testing.T, cmd *exec.Cmd, limit time.Duration) Result {
	t.Helper()
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	// A process cmd started (a daemon, a watchdog) may keep the output
	// pipes open after cmd is killed: Wait must not wait for it.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	code := hcWait(t, cmd, limit)
	return Result{Stdout: so.String(), Stderr: se.String(), Code: code}
}

// hcWait waits up to limit for cmd and returns its exit code; a command
// still running then is killed and fails the test.
func hcWait(t *testing.T, cmd *exec.Cmd, limit time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("%v: %v", cmd.Args, err)
		}
		return 0
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%v: still running after %s (killed)", cmd.Args, limit)
		return -1
	}
}

// socketOf is where the daemon of store listens: control.sock in the store
// when that fits a socket address, else <sha256(store)[:10]>.sock in the
// first fallback folder that holds it ($XDG_RUNTIME_DIR/reynfs, then
// /tmp/reynfs-<uid>), as cmd/reynfs/daemon/private.go decides.
func socketOf(t *testing.T, store string) string {
	t.Helper()
	p := filepath.Join(store, "control.sock")
	if len(p) < 104 {
		return p
	}
	sum := sha256.Sum256([]byte(store))
	name := hex.EncodeToString(sum[:10]) + ".sock"
	var dirs []string
	if rt := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(rt) {
		dirs = append(dirs, filepath.Join(rt, "reynfs"))
	}
	dirs = append(dirs, fmt.Sprintf("/tmp/reynfs-%d", os.Geteuid()))
	for _, d := range dirs {
		if _, err := os.Lstat(filepath.Join(d, name)); err == nil {
			return filepath.Join(d, name)
		}
	}
	t.Fatalf("no control socket %s for %s in %v", name, store, dirs)
	return ""
}

// hcClient is a raw control-socket client: connect, send one JSON line,
// print the answer (or why it could not).
const hcClient = `use IO::Socket::UNIX; $|=1; $SIG{PIPE} = "IGNORE";
my $c = IO::Socket::UNIX->new(Type=>SOCK_STREAM(), Peer=>$ARGV[0]) or do { print "connect: $!\n"; exit 0 };
print $c $ARGV[1]."\n"; my $l = <$c>; print defined $l ? $l : "EOF\n";`

// hcFakeServer answers every request like a daemon that made g999.
const hcFakeServer = `use IO::Socket::UNIX; $|=1; $SIG{PIPE} = "IGNORE";
mkdir $ARGV[0], 0700 if $ARGV[0] ne "";
my $s = IO::Socket::UNIX->new(Type=>SOCK_STREAM(), Local=>$ARGV[1], Listen=>8) or die "listen $ARGV[1]: $!\n";
print "ready\n";
while (my $c = $s->accept) { my $l = <$c>;
  print $c '{"generation":{"id":999,"seq":999,"kind":"manual","label":"fake","root":"fakefakefakefakefake"},"status":{"mounted":true,"pid":1,"dir":"/fake","mountpoint":"/fake"}}'."\n"; close $c; }`

// hcStartFakeServer starts the fake server as nobody; it is killed when
// the test ends.
func hcStartFakeServer(t *testing.T, mkdir, sock string) {
	t.Helper()
	cmd := exec.Command("setpriv", "--reuid="+strconv.Itoa(nobody), "--regid="+strconv.Itoa(nobody), "--clear-groups",
		"perl", "-e", hcFakeServer, mkdir, sock)
	cmd.Dir = "/"
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if l != "ready\n" {
			t.Fatalf("fake server as nobody at %s did not start: %q", sock, l)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("fake server as nobody at %s: not ready after 10 s", sock)
	}
}

// hcHead returns the daemon's head seq and the number of generations.
func hcHead(t *testing.T, m *Mount) (uint64, int) {
	t.Helper()
	r := m.Run("status", "--store", m.Store, "--json")
	var st struct {
		Head uint64 `json:"head_seq"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &st) != nil {
		t.Fatalf("reynfs status: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = m.Run("log", "--store", m.Store, "--all", "--json")
	var lg struct {
		Gens []json.RawMessage `json:"generations"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &lg) != nil {
		t.Fatalf("reynfs log --json: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	return st.Head, len(lg.Gens)
}

// TestControlSocketRefusesOtherUsers: user nobody drives none of status,
// checkpoint, rewind, export and unmount of root's mount, neither over the
// socket itself (even when its folder and mode let nobody connect) nor
// through the CLI; the daemon logs who tried.
func TestControlSocketRefusesOtherUsers(t *testing.T) {
	hcPrivileged(t)
	base, bin := hcBase(t)
	dir := filepath.Join(base, "proj")
	writeFile(t, filepath.Join(dir, "a"), []byte("root's work"), 0o644)
	m := hcMount(t, dir, filepath.Join(base, "store"))
	if r := m.Run("checkpoint", "-m", "one", "--store", m.Store); r.Code != 0 {
		t.Fatalf("reynfs checkpoint: exit %d: %s", r.Code, r.Stderr)
	}
	head, gens := hcHead(t, m)
	sock := socketOf(t, m.Store)
	exportTo := filepath.Join(base, "nobody-export")
	client := filepath.Join(base, "client.pl")
	writeFile(t, client, []byte(hcClient), 0o644)

	// As mounted: the store folder keeps nobody away from the socket.
	if r := nobodyExec(t, nil, "perl", client, sock, `{"op":"status"}`); !strings.Contains(r.Stdout, "Permission denied") {
		t.Errorf("nobody connecting to %s (store 0700): %q %q; want Permission denied", sock, r.Stdout, r.Stderr)
	}
	// Open both up: the daemon itself must still refuse.
	if err := os.Chmod(m.Store, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	for _, req := range []string{
		`{"op":"status"}`,
		`{"op":"checkpoint","label":"nobody was here"}`,
		`{"op":"rewind","target":"g1"}`,
		`{"op":"export","target":"g1","dir":"` + exportTo + `"}`,
		`{"op":"log"}`,
		`{"op":"unmount"}`,
	} {
		r := nobodyExec(t, nil, "perl", client, sock, req)
		if !strings.Contains(r.Stdout, "refused") || strings.Contains(r.Stdout, `"generation"`) || strings.Contains(r.Stdout, `"status"`) {
			t.Errorf("nobody sending %s to root's socket: answer %q (stderr %q); want a refusal", req, r.Stdout, r.Stderr)
		}
	}
	for _, args := range [][]string{
		{"status", "--store", m.Store},
		{"checkpoint", "-m", "nobody", "--store", m.Store},
		{"rewind", "g1", "--store", m.Store},
		{"export", "g1", exportTo, "--store", m.Store},
		{"log", "--store", m.Store},
		{"unmount", "--store", m.Store},
	} {
		r := nobodyExec(t, nil, append([]string{bin}, args...)...)
		what := "as nobody: reynfs " + strings.Join(args, " ")
		if r.Code == 0 || r.Code == 5 || !strings.Contains(r.Stderr, "refused") || strings.Count(r.Stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want a one-line refusal", what, r.Code, r.Stdout, r.Stderr)
		}
	}
	if !isMounted(m.Dir) {
		t.Fatalf("nobody unmounted root's workspace")
	}
	if _, err := os.Lstat(exportTo); err == nil {
		t.Errorf("root's daemon exported into %s for nobody", exportTo)
	}
	if h, g := hcHead(t, m); h != head || g != gens {
		t.Errorf("after nobody's attempts: head seq %d, %d generations; want %d and %d (unchanged)", h, g, head, gens)
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, "a")); err != nil || string(b) != "root's work" {
		t.Errorf("a = %q, %v after nobody's attempts", b, err)
	}
	if !strings.Contains(m.Log(), `"uid":65534`) {
		t.Errorf("daemon log does not name uid 65534 as refused:\n%s", m.LogTail(10))
	}
	m.Unmount()
}

// TestControlFakeServerRefused: a server user nobody runs where root's
// client looks for its daemon never answers for it: not in a socket
// folder nobody made, and not even from inside root's own private folder
// (the client checks who serves, SO_PEERCRED).
func TestControlFakeServerRefused(t *testing.T) {
	hcPrivileged(t)
	base, _ := hcBase(t)
	// A store path too long for a socket inside it: the socket goes to
	// $XDG_RUNTIME_DIR/reynfs.
	store := filepath.Join(base, strings.Repeat("s", 110))
	sum := sha256.Sum256([]byte(store))
	sockName := hex.EncodeToString(sum[:10]) + ".sock"
	env := testEnv(t)

	check := func(what string, runtime string) {
		t.Helper()
		env := append([]string{"XDG_RUNTIME_DIR=" + runtime}, env...)
		for _, args := range [][]string{{"checkpoint", "--store", store}, {"status", "--store", store}, {"unmount", "--store", store}} {
			r := runReynfs(env, args...)
			w := what + ": reynfs " + strings.Join(args, " ")
			if r.Code != 1 || strings.Contains(r.Stdout, "999") || strings.Contains(r.Stdout, "unmounted") || !strings.Contains(r.Stderr, "refusing") {
				t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 and a refusal", w, r.Code, r.Stdout, r.Stderr)
			}
		}
	}

	// nobody owns $XDG_RUNTIME_DIR and made reynfs/ in it.
	run1 := filepath.Join(base, "run1")
	if err := os.Mkdir(run1, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(run1, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	hcStartFakeServer(t, filepath.Join(run1, "reynfs"), filepath.Join(run1, "reynfs", sockName))
	check("socket folder made by nobody", run1)

	// root's own private folder, but the socket in it is nobody's.
	run2 := filepath.Join(base, "run2")
	if err := os.MkdirAll(filepath.Join(run2, "reynfs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(run2, 0o700); err != nil {
		t.Fatal(err)
	}
	nob := filepath.Join(base, "nob")
	if err := os.Mkdir(nob, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(nob, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	hcStartFakeServer(t, "", filepath.Join(nob, "fake.sock"))
	if err := os.Rename(filepath.Join(nob, "fake.sock"), filepath.Join(run2, "reynfs", sockName)); err != nil {
		t.Fatal(err)
	}
	check("nobody's server in root's folder", run2)
	r := runReynfs(append([]string{"XDG_RUNTIME_DIR=" + run2}, env...), "checkpoint", "--store", store)
	if !strings.Contains(r.Stderr, "served by uid 65534") {
		t.Errorf("reynfs checkpoint against nobody's server: stderr %q; want it to name uid 65534", r.Stderr)
	}
}

// TestControlStorePrivate: under umask 000 the socket is 0600 and the
// store 0700; a store folder others can write to is refused; a log that
// is a symlink is never written through.
func TestControlStorePrivate(t *testing.T) {
	requireFUSE(t)
	base := t.TempDir()
	dir := filepath.Join(base, "proj")
	writeFile(t, filepath.Join(dir, "a"), []byte("a"), 0o644)
	env := testEnv(t)
	mountUmask0 := func(store string) Result {
		cmd := exec.Command("sh", "-c", `umask 000 && exec "$@"`, "sh", reynfsBin, "mount", dir, "--store", store)
		cmd.Env, cmd.Dir = env, "/"
		return hcRunCmd(t, cmd, 60*time.Second)
	}

	open := filepath.Join(base, "open-store")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	r := mountUmask0(open)
	if isMounted(dir) {
		coreUnmountStray(t, env, dir, open)
	}
	rwOneLine(t, r, 2, "reynfs mount with a world-writable store folder")
	if !strings.Contains(r.Stderr, "writable by others") {
		t.Errorf("world-writable store: stderr %q does not say why", r.Stderr)
	}

	trap := filepath.Join(base, "trap-store")
	precious := filepath.Join(base, "precious")
	writeFile(t, precious, []byte("not a log"), 0o644)
	if err := os.Mkdir(trap, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(precious, filepath.Join(trap, "reynfs.log")); err != nil {
		t.Fatal(err)
	}
	r = mountUmask0(trap)
	if isMounted(dir) {
		coreUnmountStray(t, env, dir, trap)
	}
	rwOneLine(t, r, 2, "reynfs mount with reynfs.log a symlink")
	if b, _ := os.ReadFile(precious); string(b) != "not a log" {
		t.Errorf("the daemon wrote through the symlink reynfs.log: %s now holds %q", precious, b)
	}

	store := filepath.Join(base, "store")
	r = mountUmask0(store)
	if r.Code != 0 {
		t.Fatalf("reynfs mount under umask 000: exit %d: %s", r.Code, r.Stderr)
	}
	m := &Mount{t: t, Dir: dir, Store: store, env: env}
	t.Cleanup(m.cleanup)
	m.pid = m.Pid()
	for path, want := range map[string]os.FileMode{store: 0o700, socketOf(t, store): 0o600, filepath.Join(store, "reynfs.log"): 0o600} {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Errorf("%s under umask 000: %v", path, err)
		} else if fi.Mode().Perm() != want {
			t.Errorf("%s under umask 000: mode %v; want %04o", path, fi.Mode(), want)
		}
	}
	m.Unmount()
}
