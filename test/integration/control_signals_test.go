package integration

// Signals and dead daemons (issue 8 items 9, 10, 17): SIGINT and SIGTERM
// stop commands with 130/143 and an interrupted mount leaves nothing
// behind; a dead or hung daemon's mount is reported stale and cleaned;
// the daemon's dying words reach its log; overlapping mounts and stores
// are refused. The hostile-user half is in hostile_control_test.go.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hcPids lists the processes whose command line contains s.
func hcPids(s string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) && pidAlive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestSignalInterruptsMountImport: SIGINT to `reynfs mount` during a long
// first import, in the background (the spawning parent passes the signal
// on) and in the foreground, exits 130 saying so, and leaves nothing
// mounted, the project directory as it was, no store and no daemon.
func TestSignalInterruptsMountImport(t *testing.T) {
	requireFUSE(t)
	for _, mode := range []string{"background", "foreground"} {
		t.Run(mode, func(t *testing.T) { hcInterruptImport(t, mode == "foreground") })
	}
}

func hcInterruptImport(t *testing.T, foreground bool) {
	dir := filepath.Join(t.TempDir(), "big")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The import is held at its first entry (REYNFS_FAULT=import-stall)
	// until the signal cancels it: the import of sparse files skips their
	// holes, and how long one takes says nothing about when it ends.
	for i := 0; i < 40; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%03d", i)))
		if err != nil {
			t.Fatal(err)
		}
		err = f.Truncate(32 << 20)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	before := coreFingerprint(t, dir)
	store := filepath.Join(t.TempDir(), "store")
	env := append(testEnv(t), "REYNFS_FAULT=import-stall")
	t.Cleanup(func() { // whatever happened: no daemon, no mount
		for _, pid := range hcPids(store) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if isMounted(dir) {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
			t.Errorf("%s was left mounted", dir)
		}
	})
	args := []string{"mount", dir, "--store", store}
	if foreground {
		args = append(args, "--foreground")
	}
	cmd := exec.Command(reynfsBin, args...)
	cmd.Env, cmd.Dir = env, "/"
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(store, "db")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store's db did not appear within 20 s: %s", se.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // well into the import
	select {
	case <-exited:
		t.Fatalf("reynfs mount finished before the signal, with the import held (%q %q)", so.String(), se.String())
	default:
	}
	if isMounted(dir) {
		t.Fatalf("mounted before the signal, with the import held")
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("reynfs mount still running 10 s after SIGINT")
	}
	r := Result{Stdout: so.String(), Stderr: se.String(), Code: cmd.ProcessState.ExitCode()}
	what := "SIGINT to reynfs " + strings.Join(args, " ") + " during the import"
	if foreground { // the log goes to stderr too: the last line is the verdict
		lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
		last := lines[len(lines)-1]
		if r.Code != 130 || !strings.HasPrefix(last, "reynfs: ") || !strings.Contains(last, "interrupted") {
			t.Errorf("%s: exit %d, last line %q; want exit 130 and \"reynfs: ... interrupted ...\"", what, r.Code, last)
		}
	} else {
		rwOneLine(t, r, 130, what)
		if !strings.Contains(r.Stderr, "interrupted") {
			t.Errorf("%s: stderr %q does not say it was interrupted", what, r.Stderr)
		}
	}
	if isMounted(dir) {
		t.Errorf("%s is mounted after the interrupted mount", dir)
	}
	if _, err := os.Lstat(store); err == nil {
		t.Errorf("the interrupted first mount left its store %s behind", store)
	}
	for i := 0; len(hcPids(store)) > 0; i++ {
		if i == 250 {
			t.Fatalf("daemon processes %v still running 5 s after the interrupted mount", hcPids(store))
		}
		time.Sleep(20 * time.Millisecond)
	}
	coreSameFingerprint(t, dir, before, "interrupted mount")
}

// hcStop stops the daemon pid with SIGSTOP and waits until it is stopped
// (the stop takes a moment to reach every thread); it is continued when
// the test ends.
func hcStop(t *testing.T, pid int) {
	t.Helper()
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) // registered first, so it always runs
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		s := string(b)
		if j := strings.LastIndexByte(s, ')'); err == nil && j > 0 && j+2 < len(s) && s[j+2] == 'T' {
			return
		}
		if i == 500 {
			t.Fatalf("daemon %d not stopped 5 s after SIGSTOP: %q, %v", pid, s, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hcWaitConnected waits until process pid has a socket open (a client
// blocked on the daemon, its signal handling long set up), then a little.
func hcWaitConnected(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, e := range ents {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); strings.HasPrefix(l, "socket:") {
				time.Sleep(100 * time.Millisecond)
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d opened no socket within 10 s", pid)
}

// TestSignalStopsClientWait: a client waiting on a daemon that does not
// answer (stopped with SIGSTOP) exits 143 on SIGTERM and 130 on SIGINT,
// at once and with one line.
func TestSignalStopsClientWait(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("a"), 0o644)
	m := mountProject(t, dir)
	pid := m.pid
	hcStop(t, pid)
	for _, c := range []struct {
		sig  syscall.Signal
		code int
		args []string
	}{
		{syscall.SIGTERM, 143, []string{"checkpoint", "-m", "blocked", "--store", m.Store}},
		{syscall.SIGINT, 130, []string{"status", "--store", m.Store}},
		{syscall.SIGTERM, 143, []string{"rewind", "g1", "--store", m.Store}},
	} {
		cmd := exec.Command(reynfsBin, c.args...)
		cmd.Env, cmd.Dir = m.env, "/"
		var so, se strings.Builder
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("%v to reynfs %s (daemon stopped)", c.sig, strings.Join(c.args, " "))
		hcWaitConnected(t, cmd.Process.Pid)
		if err := cmd.Process.Signal(c.sig); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		code := hcWait(t, cmd, 5*time.Second)
		rwOneLine(t, Result{Stdout: so.String(), Stderr: se.String(), Code: code}, c.code, what)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if r := m.Run("status", "--store", m.Store); r.Code != 0 {
		t.Errorf("status after SIGCONT: exit %d: %s", r.Code, r.Stderr)
	}
	m.Unmount()
}

// hcWaitStatus waits up to 10 s for `reynfs status` to exit with code: a
// daemon's leader thread is a zombie (pidAlive false) a moment before its
// last thread has closed its socket, its FUSE connection and its store.
func hcWaitStatus(t *testing.T, m *Mount, code int) {
	t.Helper()
	var r Result
	for i := 0; i < 100; i++ {
		cmd := exec.Command(reynfsBin, "status", "--store", m.Store)
		cmd.Env, cmd.Dir = m.env, "/"
		if r = hcRunCmd(t, cmd, 10*time.Second); r.Code == code {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("reynfs status: exit %d (%s) for 10 s; want %d", r.Code, strings.TrimSpace(r.Stderr), code)
}

// TestStaleMount: after kill -9 of the daemon, status says the daemon is
// dead and the mount stale (exit 6) and opens no store; unmount cleans the
// mount and exits 0; the next mount serves everything acknowledged.
func TestStaleMount(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	f, err := os.Create(filepath.Join(m.Dir, "kept"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("fsynced before the kill")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	m.Kill9()
	hcWaitStatus(t, m, 6)
	for _, args := range [][]string{{"status", m.Dir}, {"status", "--store", m.Store}, {"log", "--store", m.Store}} {
		r := m.Run(args...)
		rwOneLine(t, r, 6, "reynfs "+strings.Join(args, " ")+" after kill -9")
		if !strings.Contains(r.Stderr, "daemon dead, mount stale") || !strings.Contains(r.Stderr, "reynfs unmount") {
			t.Errorf("reynfs %s after kill -9: stderr %q; want \"daemon dead, mount stale\" and how to fix it", strings.Join(args, " "), r.Stderr)
		}
	}
	r := m.Run("unmount", m.Dir)
	if r.Code != 0 || !strings.Contains(r.Stdout, "stale") {
		t.Fatalf("reynfs unmount of the stale mount: exit %d, stdout %q, stderr %q; want exit 0 saying it cleaned it", r.Code, r.Stdout, r.Stderr)
	}
	if isMounted(m.Dir) {
		t.Fatalf("%s still mounted after reynfs unmount of the stale mount", m.Dir)
	}
	if r := m.Run("status", "--store", m.Store); r.Code != 5 {
		t.Errorf("reynfs status after cleaning: exit %d, want 5 (not mounted): %s", r.Code, r.Stderr)
	}
	m.Mount()
	if b, err := os.ReadFile(filepath.Join(m.Dir, "kept")); err != nil || string(b) != "fsynced before the kill" {
		t.Errorf("kept after remount = %q, %v", b, err)
	}
	m.Unmount()
}

// TestDaemonStderrInLog: what the Go runtime writes to the background
// daemon's stderr as it dies (here the stack dump of SIGQUIT, as for a
// panic or SIGBUS) is in reynfs.log.
func TestDaemonStderrInLog(t *testing.T) {
	m := mountProject(t, t.TempDir())
	if err := syscall.Kill(m.pid, syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	m.waitDaemonGone()
	hcWaitStatus(t, m, 6)
	if log := m.Log(); !strings.Contains(log, "SIGQUIT") || !strings.Contains(log, "goroutine ") {
		t.Errorf("reynfs.log lacks the daemon's dying words (SIGQUIT, goroutine stacks); tail:\n%s", m.LogTail(5))
	}
	if r := m.Run("unmount", m.Dir); r.Code != 0 || isMounted(m.Dir) {
		t.Errorf("reynfs unmount after the crash: exit %d, %s; mounted %v", r.Code, r.Stderr, isMounted(m.Dir))
	}
}

// TestOverlapsRefused: a mount inside a reynfs mount, a project that is or
// holds a live store, and a store inside a mount are refused (exit 2, one
// line); the store fallback never opens a store inside a reynfs mount.
func TestOverlapsRefused(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "sub", "x"), []byte("x"), 0o644)
	m := mountProject(t, dir)
	env := testEnv(t)
	other := t.TempDir()
	for _, c := range []struct {
		what       string
		mountpoint string
		args       []string
	}{
		{"project inside the mount", filepath.Join(m.Dir, "sub"), []string{"mount", filepath.Join(m.Dir, "sub")}},
		{"mountpoint inside the mount", filepath.Join(m.Dir, "sub"), []string{"mount", other, "--at", filepath.Join(m.Dir, "sub")}},
		{"project is the live store", m.Store, []string{"mount", m.Store}},
		{"project holds the live store", filepath.Dir(m.Store), []string{"mount", filepath.Dir(m.Store)}},
		{"store inside the mount", other, []string{"mount", other, "--store", filepath.Join(m.Dir, "s")}},
	} {
		store := filepath.Join(t.TempDir(), "store")
		args := c.args
		if !strings.Contains(strings.Join(args, " "), "--store") {
			args = append(args, "--store", store)
		}
		r := runReynfs(env, args...)
		if isMounted(c.mountpoint) {
			coreUnmountStray(t, env, c.mountpoint, args[len(args)-1])
		}
		rwOneLine(t, r, 2, c.what+": reynfs "+strings.Join(args, " "))
		if !strings.Contains(r.Stderr, "overlaps") {
			t.Errorf("%s: stderr %q does not say what overlaps", c.what, r.Stderr)
		}
		if _, err := os.Lstat(store); err == nil {
			t.Errorf("%s: the refused mount created its store %s", c.what, store)
		}
	}
	// A folder inside the mount that looks like a store: opening it
	// offline would run Badger through the other workspace's daemon.
	fake := filepath.Join(m.Dir, "fake")
	if err := os.MkdirAll(filepath.Join(fake, "db"), 0o700); err != nil {
		t.Fatal(err)
	}
	r := runReynfs(env, "log", "--store", fake)
	rwOneLine(t, r, 2, "reynfs log --store "+fake+" (inside the mount)")
	if ents, _ := os.ReadDir(filepath.Join(fake, "db")); len(ents) != 0 {
		t.Errorf("reynfs log --store %s opened a store through the mount: db holds %d entries", fake, len(ents))
	}
	if !isMounted(m.Dir) {
		t.Fatal("the live mount is gone after the refused mounts")
	}
	m.Unmount()
}

// TestUnmountHungDaemon: a mount whose daemon is stopped and whose socket
// is gone is reported stale within seconds, and unmount aborts its FUSE
// connection and detaches it (exit 0); the daemon, continued, ends, and
// the next mount serves what it had acknowledged.
func TestUnmountHungDaemon(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	writeFile(t, filepath.Join(m.Dir, "w"), []byte("acknowledged"), 0o644)
	if r := m.Run("checkpoint", "--store", m.Store); r.Code != 0 {
		t.Fatalf("reynfs checkpoint: exit %d: %s", r.Code, r.Stderr)
	}
	pid := m.pid
	hcStop(t, pid)
	if err := os.Remove(socketOf(t, m.Store)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(reynfsBin, "status", "--store", m.Store)
	cmd.Env, cmd.Dir = m.env, "/"
	r := hcRunCmd(t, cmd, 10*time.Second)
	rwOneLine(t, r, 6, "reynfs status (daemon stopped, socket gone)")
	if !strings.Contains(r.Stderr, "hung or stopped") {
		t.Errorf("reynfs status (daemon stopped): stderr %q; want it to say the daemon is hung or stopped", r.Stderr)
	}
	unmountStoppedThenRemount(t, m, pid, 15*time.Second)
}

// unmountStoppedThenRemount: `reynfs unmount --store` of a mount whose
// daemon (pid) is SIGSTOPped aborts and detaches it within limit; the
// daemon, continued, exits and frees its store, and the next mount serves
// the file w it had acknowledged.
func unmountStoppedThenRemount(t *testing.T, m *Mount, pid int, limit time.Duration) {
	t.Helper()
	cmd := exec.Command(reynfsBin, "unmount", "--store", m.Store)
	cmd.Env, cmd.Dir = m.env, "/"
	r := hcRunCmd(t, cmd, limit)
	if r.Code != 0 || !strings.Contains(r.Stdout, "aborted") || isMounted(m.Dir) {
		t.Fatalf("reynfs unmount (daemon stopped): exit %d, stdout %q, stderr %q, mounted %v; want exit 0, aborted and detached",
			r.Code, r.Stdout, r.Stderr, isMounted(m.Dir))
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	m.waitDaemonGone()
	hcWaitStatus(t, m, 5) // its store lock released, too
	m.Mount()
	if b, err := os.ReadFile(filepath.Join(m.Dir, "w")); err != nil || string(b) != "acknowledged" {
		t.Errorf("w after the remount = %q, %v", b, err)
	}
	m.Unmount()
}
