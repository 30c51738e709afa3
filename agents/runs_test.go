package agents

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// skipOrFail skips where the machine lacks what a test needs, and fails
// instead under CI=true, where it must not be missing.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: "+format, args...)
	}
	t.Skipf(format, args...)
}

// newTestRuns opens Runs in the wanted mode for a fresh store id, and
// cancels whatever a test left running and removes its cgroup subtree.
func newTestRuns(t *testing.T, mode Mode) *Runs {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	r, err := NewRuns(Options{StoreID: "test-" + hex.EncodeToString(b[:]), ForceFallback: mode == ModeProcessGroup})
	if err != nil {
		t.Fatal(err)
	}
	if got, why := r.Mode(); got != mode {
		skipOrFail(t, "runs in %s mode, not %s: %s", got, mode, why)
	}
	t.Cleanup(func() {
		for _, ri := range r.List() {
			if run := r.Get(ri.ID); run != nil {
				if err := run.Cancel(0); err != nil {
					t.Errorf("cleanup: %v", err)
					forceKill(run)
				}
			}
		}
		if err := r.Close(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if _, err := os.Stat(r.dir); r.dir != "" && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cleanup: %s left behind: %v", r.dir, err)
		}
	})
	return r
}

// forceKill ends what a failed Cancel left, so no test leaks processes.
func forceKill(run *Run) {
	if run.dir == "" {
		_ = syscall.Kill(-run.Pid(), syscall.SIGKILL)
		_ = syscall.Kill(-run.Pid(), syscall.SIGCONT)
		return
	}
	_ = cgWrite(run.dir, "cgroup.kill", "1")
	_ = cgWrite(run.dir, "cgroup.freeze", "0")
	_ = cgWait(run.dir, EmptyTimeout, "exit", func(p, _ bool) bool { return !p })
	_ = cgRemove(run.dir)
}

// forModes runs body once per mode as a subtest.
func forModes(t *testing.T, body func(t *testing.T, r *Runs)) {
	for _, m := range []Mode{ModeCgroup, ModeProcessGroup} {
		t.Run(string(m), func(t *testing.T) { body(t, newTestRuns(t, m)) })
	}
}

// eventually polls cond for at most d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// alive: pid exists and is not a zombie.
func alive(pid int) bool {
	s, err := readStat(pid)
	return err == nil && s.state != 'Z' && s.state != 'X'
}

// readPids waits for a file of whitespace-separated pids written by a run.
func readPids(t *testing.T, path string, n int) []int {
	t.Helper()
	var pids []int
	eventually(t, 3*time.Second, "pids in "+path, func() bool {
		data, _ := os.ReadFile(path)
		f := strings.Fields(string(data))
		if len(f) < n || !strings.HasSuffix(string(data), "\n") {
			return false
		}
		pids = pids[:0]
		for _, s := range f {
			p, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("pid file %s: %q", path, data)
			}
			pids = append(pids, p)
		}
		return true
	})
	return pids
}

// TestCancel: a tree of three processes, once obeying SIGTERM and once
// ignoring it (so only the kill after the grace period ends it), is gone
// within grace + 1 s, with its cgroup empty and removed.
func TestCancel(t *testing.T) {
	forModes(t, func(t *testing.T, r *Runs) {
		for _, tc := range []struct{ name, trap string }{{"term", ""}, {"ignore-term", `trap "" TERM; `}} {
			t.Run(tc.name, func(t *testing.T) {
				pidf := filepath.Join(t.TempDir(), "pids")
				script := tc.trap + `sleep 1000 & a=$!; sleep 1000 & echo $a $! > ` + pidf + `; wait`
				run, err := r.Start(Spec{Agent: "coder", Label: tc.name, Cmd: exec.Command("sh", "-c", script)})
				if err != nil {
					t.Fatal(err)
				}
				if info := run.Info(); info.State != StateRunning || info.Pid == 0 || info.OnRewind != PolicyKill {
					t.Fatalf("info after start: %+v", info)
				}
				pids := append(readPids(t, pidf, 2), run.Pid())
				const grace = 300 * time.Millisecond
				start := time.Now()
				if err := run.Cancel(grace); err != nil {
					t.Fatal(err)
				}
				if took := time.Since(start); took > grace+time.Second {
					t.Errorf("cancel took %v, want at most %v", took, grace+time.Second)
				}
				if tc.trap == "" && time.Since(start) >= grace {
					t.Errorf("a tree that obeys SIGTERM waited the whole grace period")
				}
				for _, p := range pids {
					if alive(p) {
						t.Errorf("pid %d survived the cancel", p)
					}
				}
				if run.dir != "" {
					if _, err := os.Stat(run.dir); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("cgroup %s left behind: %v", run.dir, err)
					}
				}
				select {
				case <-run.Done():
				case <-time.After(2 * time.Second):
					t.Fatal("the first process was not reaped")
				}
				if info := run.Info(); info.State != StateCancelled || info.ExitCode != 128+int(syscall.SIGTERM) && info.ExitCode != 128+int(syscall.SIGKILL) {
					t.Errorf("info after cancel: %+v", info)
				}
				if r.Get(run.ID) != nil {
					t.Error("a cancelled run is still listed")
				}
			})
		}
	})
}

// TestFreeze: a frozen writer loop stops appending; thawed, it goes on.
func TestFreeze(t *testing.T) {
	forModes(t, func(t *testing.T, r *Runs) {
		f := filepath.Join(t.TempDir(), "f")
		run, err := r.Start(Spec{OnRewind: PolicyFreeze,
			Cmd: exec.Command("sh", "-c", `while :; do echo x >> `+f+`; sleep 0.005; done`)})
		if err != nil {
			t.Fatal(err)
		}
		size := func() int64 {
			st, err := os.Stat(f)
			if err != nil {
				return 0
			}
			return st.Size()
		}
		eventually(t, 3*time.Second, "the writer writes", func() bool { return size() > 10 })
		if err := run.Freeze(); err != nil {
			t.Fatal(err)
		}
		if run.Info().State != StateFrozen {
			t.Errorf("state %s after freeze", run.Info().State)
		}
		s1 := size()
		time.Sleep(300 * time.Millisecond)
		if s2 := size(); s2 != s1 {
			t.Fatalf("the file grew from %d to %d bytes while frozen", s1, s2)
		}
		if err := run.Thaw(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 3*time.Second, "the writer resumes", func() bool { return size() > s1 })
		if run.Info().State != StateRunning {
			t.Errorf("state %s after thaw", run.Info().State)
		}
	})
}

// TestExitCode: the first process's exit status passes through, a death
// by signal as 128+N, and Signal forwards.
func TestExitCode(t *testing.T) {
	forModes(t, func(t *testing.T, r *Runs) {
		run, err := r.Start(Spec{Cmd: exec.Command("sh", "-c", "exit 7")})
		if err != nil {
			t.Fatal(err)
		}
		if code := run.Wait(); code != 7 {
			t.Errorf("exit code %d, want 7", code)
		}
		if err := run.Remove(); err != nil {
			t.Error(err)
		}
		run, err = r.Start(Spec{Cmd: exec.Command("sleep", "1000")})
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		select {
		case <-run.Done():
		case <-time.After(3 * time.Second):
			t.Fatal("SIGINT was not forwarded")
		}
		if code := run.Wait(); code != 128+int(syscall.SIGINT) {
			t.Errorf("exit code %d, want %d", code, 128+int(syscall.SIGINT))
		}
		if info := run.Info(); info.State != StateExited {
			t.Errorf("state %s, want exited", info.State)
		}
		eventually(t, 3*time.Second, "the run is empty", func() bool { return run.Remove() == nil })
		if _, err := r.Start(Spec{OnRewind: "sometimes", Cmd: exec.Command("true")}); err == nil {
			t.Error("a bad policy was accepted")
		}
	})
}

// TestRunOf: a grandchild resolves to its run, this process to none, and a
// pid that was reused by a process outside any run is not taken for the
// run of the process that had it before.
func TestRunOf(t *testing.T) {
	forModes(t, func(t *testing.T, r *Runs) {
		pidf := filepath.Join(t.TempDir(), "pids")
		// The inner shell forks the sleep; the outer one forks the inner.
		inner := `sleep 1000 & echo $! > ` + pidf + `; wait`
		run, err := r.Start(Spec{Agent: "planner", Cmd: exec.Command("sh", "-c", `sh -c '`+inner+`' & wait`)})
		if err != nil {
			t.Fatal(err)
		}
		gc := readPids(t, pidf, 1)[0]
		if got := r.RunOf(gc); got != run {
			t.Fatalf("RunOf(grandchild %d) = %v, want run %s", gc, got, run.ID)
		}
		if got := r.RunOf(gc); got != run { // now from the cache
			t.Fatalf("RunOf(grandchild %d) from the cache = %v", gc, got)
		}
		if got := r.RunOf(os.Getpid()); got != nil {
			t.Fatalf("RunOf(this test) = run %s", got.ID)
		}

		// A stale cache entry for this very pid (another start time, as a
		// process that had the pid before would leave) must not match.
		self := os.Getpid()
		st, err := readStat(self)
		if err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		r.cache[procKey{self, st.start - 1}] = run.ID
		r.mu.Unlock()
		if got := r.RunOf(self); got != nil {
			t.Fatalf("a stale cache entry mislabelled pid %d as run %s", self, got.ID)
		}

		// The real thing: kill the grandchild (its shell reaps it) and have
		// the kernel give its pid to a process outside any run.
		if err := syscall.Kill(gc, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		eventually(t, 3*time.Second, "the grandchild is reaped", func() bool { _, err := readStat(gc); return err != nil })
		// A process is known by its pid and start time, which /proc gives
		// in clock ticks (10 ms): a pid reused within the tick its last
		// owner started in looks like the same process. Only a writer of
		// ns_last_pid (root) can reuse a pid that fast, as below; so the
		// reuse here waits for the next tick.
		time.Sleep(20 * time.Millisecond)
		other := reusePid(t, gc)
		if other == nil {
			return
		}
		if got := r.RunOf(gc); got != nil {
			t.Errorf("reused pid %d (now outside any run) was attributed to run %s", gc, got.ID)
		}
	})
}

// reusePid starts `sleep 1000` with exactly pid p (as root, through
// /proc/sys/kernel/ns_last_pid; other processes may take it first, so it
// tries a few times). It skips the rest of the test if it cannot.
func reusePid(t *testing.T, p int) *exec.Cmd {
	t.Helper()
	for range 20 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(p-1)), 0); err != nil {
			t.Logf("cannot reuse a pid here (needs root): %v", err)
			return nil
		}
		c := exec.Command("sleep", "1000")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.Process.Pid == p {
			t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
			return c
		}
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	t.Logf("pid %d was always taken by another process first", p)
	return nil
}

func TestParseMountinfo(t *testing.T) {
	mi := "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" +
		`41 31 0:38 /sub /sys/fs/cgroup/uni\040fied rw,relatime - cgroup2 cgroup2 rw` + "\n"
	dir, root, err := cgroup2Mount([]byte(mi))
	if err != nil || dir != "/sys/fs/cgroup/uni fied" || root != "/sub" {
		t.Errorf("cgroup2Mount = %q %q %v", dir, root, err)
	}
	if _, _, err := cgroup2Mount([]byte(mi[:strings.Index(mi, "\n")+1])); err == nil {
		t.Error("found a cgroup2 mount in a v1-only mountinfo")
	}
}
