package agents

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// TestGroupOutlivesItsLeader: a run's group whose leader exits first, is
// reaped, and leaves a member running is still the run's (pid pg stays
// taken while the group has a member, so it cannot be anyone else's), and
// a cancel waits for that member and kills it. group() once read /proc
// before asking the leader's pidfd: a leader reaped in between made a live
// group look gone, and TestCancel's cancel return with members alive.
func TestGroupOutlivesItsLeader(t *testing.T) {
	// The member, orphaned when the leader exits, is then ours to reap
	// (Attach starts the reaper), as `reynfs run` is for its command's;
	// init here reaps a killed orphan only a second or two later.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	r := newTestRuns(t, ModeProcessGroup)
	run, err := r.Create(Spec{ID: "orphaned"})
	if err != nil {
		t.Fatal(err)
	}
	pidf := t.TempDir() + "/pid"
	lead := exec.Command("sh", "-c", `trap "" TERM; sleep 1000 & echo $! > `+pidf+`; read x; exit 0`)
	lead.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := lead.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := lead.Start(); err != nil {
		t.Fatal(err)
	}
	if err := r.Attach(run, lead.Process.Pid); err != nil {
		t.Fatal(err)
	}
	member := readPids(t, pidf, 1)[0]
	t.Cleanup(func() { _ = syscall.Kill(member, syscall.SIGKILL) })
	pg := lead.Process.Pid
	if got := run.group(); got != pg {
		t.Fatalf("group() with the leader alive = %d, want %d", got, pg)
	}
	in.Close() // the leader's read returns: it exits, and is reaped (by Wait or Attach's reaper)
	_ = lead.Wait()
	eventually(t, 3*time.Second, "the leader reaped", func() bool {
		_, err := readStat(pg)
		return err != nil
	})
	for range 50 {
		if got := run.group(); got != pg {
			t.Fatalf("group() with the leader reaped and pid %d running = %d, want %d", member, got, pg)
		}
	}
	if err := run.Cancel(100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if alive(member) {
		t.Errorf("pid %d, the group's last member, survived the cancel", member)
	}
	if got := run.group(); got != 0 {
		t.Errorf("group() after the cancel = %d, want 0", got)
	}
}
