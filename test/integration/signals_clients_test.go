package integration

// SIGINT and SIGTERM during each client command (issue 8 item 9: "SIGINT
// during import and during each client command"). The import half is
// TestSignalInterruptsMountImport in control_signals_test.go.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sigClient is one client command run against a stopped daemon.
type sigClient struct {
	name string
	args []string
	// answers: the command does not wait for the daemon and exits at
	// once with its own one-line error instead of being interrupted.
	answers bool
}

// TestSignalsInterruptEveryClient: with the daemon stopped (SIGSTOP), every
// client command blocks on it; SIGINT and then SIGTERM make each exit 130
// or 143 within seconds, with one line on stderr and no Go stack trace.
// Continued, the daemon carries out none of the interrupted requests,
// still serves the workspace, and unmounts.
func TestSignalsInterruptEveryClient(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("a"), 0o644)
	m := mountProject(t, dir)
	writeFile(t, filepath.Join(m.Dir, "b"), []byte("b"), 0o644)
	if r := m.Run("checkpoint", "-m", "before", "--store", m.Store); r.Code != 0 {
		t.Fatalf("reynfs checkpoint: exit %d: %s", r.Code, r.Stderr)
	}
	out := t.TempDir()
	state := filepath.Join(out, "state.json")
	writeFile(t, state, []byte(`{"step":1}`), 0o644)
	s := m.Store
	clients := []sigClient{
		{name: "status", args: []string{"status", "--store", s}},
		{name: "status DIR", args: []string{"status", m.Dir}},
		{name: "checkpoint", args: []string{"checkpoint", "-m", "blocked", "--store", s}},
		{name: "log", args: []string{"log", "--store", s}},
		{name: "diff", args: []string{"diff", "g1", "--store", s}},
		{name: "show", args: []string{"show", "g1", "--store", s}},
		{name: "export", args: []string{"export", "g1", filepath.Join(out, "export"), "--store", s}},
		{name: "rewind", args: []string{"rewind", "g1", "--store", s}},
		{name: "restore", args: []string{"restore", filepath.Join(m.Dir, "a"), "--from", "g1"}},
		{name: "agent save", args: []string{"agent", "save", "planner", state, "--store", s}},
		{name: "agent list", args: []string{"agent", "list", "--store", s}},
		{name: "agent show", args: []string{"agent", "show", "planner", "--store", s}},
		{name: "unmount", args: []string{"unmount", "--store", s}},
		// gc on a mounted store is the daemon's work.
		{name: "gc", args: []string{"gc", "--keep", "1", "--store", s}},
		// fsck checks an unmounted store only: it sees the mount in
		// mountinfo and refuses at once (exit 3), without asking the
		// daemon.
		{name: "fsck", args: []string{"fsck", "--store", s}, answers: true},
	}
	pid := m.pid
	hcStop(t, pid)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		for _, c := range clients {
			sigInterrupt(t, m, c, sig)
		}
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if r := m.Run("status", "--store", m.Store); r.Code != 0 {
		t.Errorf("status after SIGCONT: exit %d: %s", r.Code, r.Stderr)
	}
	// The interrupted requests sat in the socket's queue: the daemon,
	// continued, must drop them, not rewind or checkpoint behind the
	// back of clients that reported "interrupted".
	want := 0
	for _, c := range clients {
		if !c.answers {
			want += 2
		}
	}
	for i := 0; strings.Count(m.Log(), "not carried out") < want; i++ {
		if i == 100 {
			t.Errorf("the daemon log names %d dropped requests, want %d", strings.Count(m.Log(), "not carried out"), want)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := m.Run("log", "--all", "--store", m.Store); strings.Contains(r.Stdout, "blocked") || strings.Contains(r.Stdout, "rewind") {
		t.Errorf("an interrupted checkpoint or rewind was carried out after SIGCONT:\n%s", r.Stdout)
	}
	for name, data := range map[string]string{"a": "a", "b": "b"} {
		if b, err := os.ReadFile(filepath.Join(m.Dir, name)); err != nil || string(b) != data {
			t.Errorf("%s after SIGCONT = %q, %v; want %q", name, b, err, data)
		}
	}
	m.Unmount()
}

// sigInterrupt runs c, sends sig once it waits on the daemon (it has a
// socket open, or has run a second: a command blocked in a system call on
// the mount opens none), and checks it ends within 5 s with 128+sig, or
// with its own error for a command that answers at once, one line on
// stderr and no Go stack trace.
func sigInterrupt(t *testing.T, m *Mount, c sigClient, sig syscall.Signal) {
	t.Helper()
	what := fmt.Sprintf("%v to reynfs %s (daemon stopped)", sig, c.name)
	cmd := exec.Command(reynfsBin, c.args...)
	cmd.Env, cmd.Dir = m.env, "/"
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	start := time.Now()
	blocked := false
	for !blocked && time.Since(start) < time.Second {
		select {
		case err := <-exited:
			exited <- err
			blocked = true // it answered: nothing to interrupt
			continue
		case <-time.After(10 * time.Millisecond):
		}
		blocked = sigHasSocket(cmd.Process.Pid)
	}
	time.Sleep(100 * time.Millisecond) // well inside the wait
	select {
	case err := <-exited:
		r := Result{Stdout: so.String(), Stderr: se.String(), Code: sigExitCode(err)}
		if !c.answers {
			t.Errorf("%s: exited %d before the signal (%q): it did not wait for the stopped daemon", what, r.Code, strings.TrimSpace(r.Stderr))
			return
		}
		sigOneLine(t, r, what)
		if r.Code == 0 || r.Code >= 128 {
			t.Errorf("%s: exit %d; want its own error", what, r.Code)
		}
		t.Logf("%s: answered at once, exit %d: %s", what, r.Code, strings.TrimSpace(r.Stderr))
		return
	default:
	}
	sent := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Errorf("%s: still running 5 s after the signal (killed)", what)
		return
	}
	r := Result{Stdout: so.String(), Stderr: se.String(), Code: sigExitCode(err)}
	if c.answers {
		t.Errorf("%s: waited for the stopped daemon; it should answer at once", what)
	}
	sigOneLine(t, r, what)
	if want := 128 + int(sig); r.Code != want {
		t.Errorf("%s: exit %d, want %d; stderr %q", what, r.Code, want, r.Stderr)
	}
	t.Logf("%s: exit %d %.2fs after the signal: %s", what, r.Code, time.Since(sent).Seconds(), strings.TrimSpace(r.Stderr))
}

// sigOneLine: one "reynfs: " line on stderr, nothing on stdout, no trace.
func sigOneLine(t *testing.T, r Result, what string) {
	t.Helper()
	if r.Stdout != "" || strings.Count(r.Stderr, "\n") != 1 || !strings.HasPrefix(r.Stderr, "reynfs: ") ||
		strings.Contains(r.Stderr, "goroutine ") || strings.Contains(r.Stderr, "panic") {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want nothing on stdout and one line \"reynfs: ...\" on stderr",
			what, r.Code, r.Stdout, r.Stderr)
	}
}

// sigHasSocket reports whether process pid has a socket open.
func sigHasSocket(pid int) bool {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, e := range ents {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); strings.HasPrefix(l, "socket:") {
			return true
		}
	}
	return false
}

// sigExitCode is the exit code cmd.Wait's error stands for (-1: no exit).
func sigExitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}
