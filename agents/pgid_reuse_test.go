package agents

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestReusedPgidIsNotTheRun: in the process-group fallback a run whose
// group has emptied (its launcher died without reporting the exit, so the
// run stays registered) must not claim the group that a new process,
// anyone's, later gets under the same id: its writes are not the run's,
// and a rewind cancelling the run must not stop or kill it. The pid is
// reused on purpose through /proc/sys/kernel/ns_last_pid (root only).
func TestReusedPgidIsNotTheRun(t *testing.T) {
	const lastPid = "/proc/sys/kernel/ns_last_pid"
	f, err := os.OpenFile(lastPid, os.O_WRONLY, 0)
	if err != nil {
		skipOrFail(t, "needs to write %s (root): %v", lastPid, err)
	}
	defer f.Close()
	r := newTestRuns(t, ModeProcessGroup)
	run, err := r.Create(Spec{ID: "victim"})
	if err != nil {
		t.Fatal(err)
	}
	first := exec.Command("true")
	first.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	n := first.Process.Pid
	if err := r.Attach(run, n); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait() // the group is empty now; nobody reports run.exited

	// Another process gets pid n and leads a new group n.
	var other *exec.Cmd
	for range 20 {
		if _, err := f.WriteAt([]byte(strconv.Itoa(n-1)), 0); err != nil {
			t.Fatal(err)
		}
		c := exec.Command("setsid", "sleep", "30")
		if err := c.Start(); err != nil {
			skipOrFail(t, "setsid sleep: %v", err)
		}
		if c.Process.Pid == n {
			other = c
			break
		}
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	if other == nil {
		skipOrFail(t, "could not get pid %d again in 20 tries (other processes took it)", n)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := readStat(n)
		if err == nil && st.pgid == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never led its own group: %+v %v", n, st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	if got := r.RunOf(n); got != nil {
		t.Errorf("RunOf(%d), a new process that reuses the run's old pgid, = run %s; want none", n, got.ID)
	}
	if err := run.Cancel(0); err != nil {
		t.Errorf("cancel: %v", err)
	}
	if st, err := readStat(n); err != nil || st.state == 'T' || st.state == 'Z' {
		t.Errorf("cancelling the run stopped or killed pid %d, which is not in it: %+v %v", n, st, err)
	}
}
