package agents

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary play `reynfs run`: with
// REYNFS_TEST_LAUNCH set it launches `sh -c $REYNFS_TEST_LAUNCH` into the
// cgroup $REYNFS_TEST_CGROUP (or a process group if empty), prints the pid
// and exits with the command's status.
func TestMain(m *testing.M) {
	if script := os.Getenv("REYNFS_TEST_LAUNCH"); script != "" {
		cmd := exec.Command("sh", "-c", script)
		p, err := Launch(cmd, os.Getenv("REYNFS_TEST_CGROUP"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(125)
		}
		fmt.Println(p.Pid)
		os.Exit(p.Wait())
	}
	os.Exit(m.Run())
}

// TestCreateAttach: the daemon's half (Create, Attach, RunOf, Cancel) on a
// run that another process launched, as `reynfs run` will: the launcher
// passes the exit status through, and the daemon's cancel reaches the
// whole tree although none of it is the daemon's child.
func TestCreateAttach(t *testing.T) {
	forModes(t, func(t *testing.T, r *Runs) {
		run, err := r.Create(Spec{Agent: "coder", OnRewind: PolicyKill})
		if err != nil {
			t.Fatal(err)
		}
		if (r.mode == ModeCgroup) != (run.CgroupDir() != "") {
			t.Fatalf("mode %s with cgroup dir %q", r.mode, run.CgroupDir())
		}
		launcher := exec.Command(os.Args[0], "-test.run=^$")
		launcher.Env = append(os.Environ(), "REYNFS_TEST_LAUNCH=sleep 1000 & sleep 1000 & wait",
			"REYNFS_TEST_CGROUP="+run.CgroupDir())
		out, err := launcher.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		launcher.Stderr = os.Stderr
		if err := launcher.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = launcher.Process.Kill(); _ = launcher.Wait() })
		line := make(chan string, 1)
		go func() {
			l, _ := bufio.NewReader(out).ReadString('\n')
			line <- l
		}()
		var pid int
		select {
		case l := <-line:
			if pid, err = strconv.Atoi(strings.TrimSpace(l)); err != nil {
				t.Fatalf("launcher printed %q", l)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the launcher printed no pid")
		}
		if err := r.Attach(run, launcher.Process.Pid); err == nil {
			t.Error("attached the launcher, which is not in the run")
		}
		if err := r.Attach(run, pid); err != nil {
			t.Fatal(err)
		}
		if got := r.RunOf(pid); got != run {
			t.Fatalf("RunOf(%d) = %v, want run %s", pid, got, run.ID)
		}
		if got := r.RunOf(launcher.Process.Pid); got != nil {
			t.Fatalf("the launcher was attributed to run %s", got.ID)
		}
		eventually(t, 3*time.Second, "three processes", func() bool {
			n := 0
			if run.dir != "" {
				p, _ := cgProcs(run.dir)
				n = len(p)
			} else {
				n = len(groupMembers(pid))
			}
			return n == 3
		})
		if err := run.Cancel(300 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- launcher.Wait() }()
		select {
		case err = <-done:
		case <-time.After(3 * time.Second):
			t.Fatal("the launcher did not exit after the cancel")
		}
		code := launcher.ProcessState.ExitCode()
		if code != 128+int(syscall.SIGTERM) {
			t.Errorf("launcher exited %d (%v), want %d", code, err, 128+int(syscall.SIGTERM))
		}
		run.Exited(code)
		if info := run.Info(); info.State != StateCancelled || info.ExitCode != code || info.Pid != pid {
			t.Errorf("info: %+v", info)
		}
	})
}

// TestCancelUnattached: a run created but never attached (its launcher
// died before reporting a pid) cancels and goes away without signalling
// anything: in the fallback its pid 0 must never become kill(0, …), which
// would hit this process's own group.
func TestCancelUnattached(t *testing.T) {
	forModes(t, func(t *testing.T, r *Runs) {
		run, err := r.Create(Spec{Label: "never launched"})
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Freeze(); err != nil {
			t.Fatal(err)
		}
		if err := run.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := run.Cancel(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if r.Get(run.ID) != nil || len(r.Active()) != 0 {
			t.Error("the cancelled run is still there")
		}
	})
}
