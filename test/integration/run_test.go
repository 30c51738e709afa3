package integration

import (
	"context"
	"encoding/json"
	"errors"
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

// runInfo is one run of `reynfs runs --json`.
type runInfo struct {
	ID       string `json:"id"`
	Agent    string `json:"agent"`
	Label    string `json:"label"`
	OnRewind string `json:"on_rewind"`
	Pid      int    `json:"pid"`
	State    string `json:"state"`
	ExitCode int    `json:"exit_code"`
}

// runsOf lists the runs of m's workspace.
func runsOf(t *testing.T, m *Mount) (mode string, runs []runInfo) {
	t.Helper()
	r := m.Run("runs", "--json", "--dir", m.Dir)
	if r.Code != 0 {
		t.Fatalf("reynfs runs: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	var out struct {
		Runs []runInfo `json:"runs"`
		Mode string    `json:"mode"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil {
		t.Fatalf("reynfs runs --json: %v\n%s", err, r.Stdout)
	}
	return out.Mode, out.Runs
}

// reynfsRun prepares `reynfs run ARGS` in the workspace, bounded by ctx.
func reynfsRun(ctx context.Context, m *Mount, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, reynfsBin, append([]string{"run"}, args...)...)
	cmd.Env = m.env
	cmd.Dir = m.Dir
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// TestRunPassesExitStatus: `reynfs run` runs its command in the workspace
// from the CLI process, exits with its status, and the daemon lists the
// run with its agent, label and exit code; a command that cannot start
// exits 127, and a bad --on-rewind is a usage error.
func TestRunPassesExitStatus(t *testing.T) {
	m := mountProject(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := reynfsRun(ctx, m, "--agent", "coder", "--label", "try", "--", "sh", "-c", "echo x > f; exit 7")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("reynfs run -- sh -c 'exit 7': %v; want exit 7\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, "f")); err != nil || string(b) != "x\n" {
		t.Fatalf("f = %q, %v; want the command's write", b, err)
	}
	mode, runs := runsOf(t, m)
	if mode != "cgroup2" && mode != "process-group" {
		t.Errorf("runs mode %q; want cgroup2 or process-group", mode)
	}
	var st struct {
		RunMode       string `json:"run_mode"`
		RunModeReason string `json:"run_mode_reason"`
	}
	if r := m.Run("status", "--json", m.Dir); r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &st) != nil ||
		st.RunMode != mode || st.RunModeReason == "" {
		t.Errorf("reynfs status --json: exit %d, %s; want run_mode %q and its reason", r.Code, r.Stdout, mode)
	}
	if len(runs) != 1 || runs[0].State != "exited" || runs[0].ExitCode != 7 || runs[0].Agent != "coder" ||
		runs[0].Label != "try" || runs[0].OnRewind != "kill" || runs[0].Pid <= 1 {
		t.Fatalf("runs = %+v; want one run of agent coder, label try, exited 7", runs)
	}

	if out, err := reynfsRun(ctx, m, "--", filepath.Join(m.Dir, "no-such-command")).CombinedOutput(); !errors.As(err, &ee) || ee.ExitCode() != 127 {
		t.Errorf("reynfs run of a missing command: %v; want exit 127\n%s", err, out)
	}
	if out, err := reynfsRun(ctx, m, "--on-rewind", "pause", "--", "true").CombinedOutput(); !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("reynfs run --on-rewind pause: %v; want exit 2\n%s", err, out)
	}
}

// TestRunForwardsSignals: SIGTERM sent to `reynfs run` reaches its
// command, which dies of it, and reynfs run exits 143 as a shell would.
func TestRunForwardsSignals(t *testing.T) {
	m := mountProject(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := reynfsRun(ctx, m, "--", "sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run of sleep 1000 was never listed as running with a pid")
		}
		if _, runs := runsOf(t, m); len(runs) == 1 && runs[0].State == "running" && runs[0].Pid > 1 {
			pid = runs[0].Pid
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err // for the cleanup
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 143 {
			t.Fatalf("reynfs run after SIGTERM: %v; want exit 143 (sleep killed by the forwarded signal)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reynfs run did not exit within 10 s of SIGTERM")
	}
	if pidAlive(pid) {
		t.Errorf("sleep (pid %d) outlived the SIGTERM forwarded to it", pid)
	}
	if _, runs := runsOf(t, m); len(runs) != 1 || runs[0].State != "exited" || runs[0].ExitCode != 143 {
		t.Errorf("runs = %+v; want the run exited 143", runs)
	}
}

// childrenOf lists the child pids of pid (/proc/PID/task/PID/children).
func childrenOf(pid int) []int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// startRun starts `reynfs run ARGS` in the background and waits until the
// daemon lists one more running run with a pid; it returns the command,
// a channel with its exit, and that run.
func startRun(t *testing.T, ctx context.Context, m *Mount, args ...string) (*exec.Cmd, chan error, runInfo) {
	t.Helper()
	_, before := runsOf(t, m)
	cmd := reynfsRun(ctx, m, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case err := <-done:
			done <- err
		case <-time.After(5 * time.Second):
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("reynfs run %v was never listed as running\n%s", args, out.String())
		}
		if _, runs := runsOf(t, m); len(runs) == len(before)+1 {
			if r := runs[len(runs)-1]; r.State == "running" && r.Pid > 1 {
				return cmd, done, r
			}
		}
	}
}

// TestRunCancelledByRewind: a rewind cancels the run of the future it
// abandons (ADR-0038 D2/D4): the run's background sleep is gone within
// the grace period, the file it wrote is gone, and the rewind names the
// run; `--no-cancel` refuses with runs_active (exit 1) while it runs.
func TestRunCancelledByRewind(t *testing.T) {
	m := mountProject(t, t.TempDir())
	if r := m.Run("checkpoint", "--dir", m.Dir, "-m", "before"); r.Code != 0 {
		t.Fatalf("checkpoint: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, done, run := startRun(t, ctx, m, "--", "sh", "-c", "sleep 1000 & echo x > f; wait")
	var sleepPid int
	for deadline := time.Now().Add(5 * time.Second); sleepPid == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run's sleep never started")
		}
		if _, err := os.Stat(filepath.Join(m.Dir, "f")); err == nil {
			if c := childrenOf(run.Pid); len(c) == 1 {
				sleepPid = c[0]
			}
		}
	}
	r := m.Run("rewind", "before", "--dir", m.Dir, "--no-cancel")
	if r.Code != 1 || !strings.Contains(r.Stderr, "runs active") {
		t.Fatalf("rewind --no-cancel with a run going: exit %d: %s%s; want exit 1 (runs_active)", r.Code, r.Stdout, r.Stderr)
	}
	start := time.Now()
	r = m.Run("rewind", "before", "--dir", m.Dir)
	took := time.Since(start)
	if r.Code != 0 || !strings.Contains(r.Stdout, "cancelled run "+run.ID) {
		t.Fatalf("rewind: exit %d: %s%s; want it to name the cancelled run %s", r.Code, r.Stdout, r.Stderr, run.ID)
	}
	if took > 3*time.Second || pidAlive(sleepPid) {
		t.Errorf("rewind took %v, sleep (pid %d) alive: %v; want it gone within the 2 s grace + 1 s", took, sleepPid, pidAlive(sleepPid))
	}
	if _, err := os.Lstat(filepath.Join(m.Dir, "f")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("f after the rewind: %v; want it gone as before the run", err)
	}
	select {
	case err := <-done:
		done <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 143 {
			t.Errorf("reynfs run of the cancelled run: %v; want exit 143 (SIGTERM)", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("reynfs run did not exit after its run was cancelled")
	}
}

// TestRunFrozenAcrossRewind: a run started with --on-rewind freeze is
// frozen across the rewind and thawed after it: its process lives on,
// running, and the rewind says so.
func TestRunFrozenAcrossRewind(t *testing.T) {
	m := mountProject(t, t.TempDir())
	if r := m.Run("checkpoint", "--dir", m.Dir, "-m", "before"); r.Code != 0 {
		t.Fatalf("checkpoint: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd, _, run := startRun(t, ctx, m, "--on-rewind", "freeze", "--", "sleep", "1000")
	writeFile(t, filepath.Join(m.Dir, "after"), []byte("x"), 0o644) // else the rewind is a no-op, which stops no run
	r := m.Run("rewind", "before", "--dir", m.Dir)
	if r.Code != 0 || !strings.Contains(r.Stdout, "froze and thawed run "+run.ID) {
		t.Fatalf("rewind: exit %d: %s%s; want it to name the frozen run %s", r.Code, r.Stdout, r.Stderr, run.ID)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", run.Pid))
	if err != nil {
		t.Fatalf("the frozen run's process is gone after the rewind: %v", err)
	}
	if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) == 0 || (f[0] != "S" && f[0] != "R") {
		t.Errorf("the run's process after the rewind: %q; want it thawed (sleeping or running)", b)
	}
	if _, runs := runsOf(t, m); len(runs) != 1 || runs[0].State != "running" {
		t.Errorf("runs after the rewind = %+v; want it running", runs)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
}

// TestRunEndsWithUnmount: a run still going when its workspace is
// unmounted is cancelled (it would otherwise write into the directory
// behind reynfs's back), and its processes, even one whose `reynfs run`
// was killed, are gone within the grace period.
func TestRunEndsWithUnmount(t *testing.T) {
	m := mountProject(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd, done, run := startRun(t, ctx, m, "--", "sh", "-c", "sleep 1000 & wait")
	var sleeper int
	for deadline := time.Now().Add(5 * time.Second); sleeper == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run's sleep never started (run pid %d)", run.Pid)
		}
		if kids := childrenOf(run.Pid); len(kids) > 0 {
			sleeper = kids[0]
		}
	}
	_ = cmd.Process.Kill() // reynfs run itself is gone: nothing forwards signals now
	<-done
	done <- nil
	m.Unmount()
	for deadline := time.Now().Add(agentsGrace + 3*time.Second); pidAlive(sleeper); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(sleeper, syscall.SIGKILL)
			t.Fatalf("the run's sleep (pid %d) outlived the unmount of its workspace", sleeper)
		}
	}
}

// agentsGrace is agents.DefaultGrace, the time a cancelled run has for SIGTERM.
const agentsGrace = 2 * time.Second
