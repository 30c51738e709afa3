package fs

import (
	"os"
	"os/exec"
	"sync/atomic"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// A pid whose process exited is looked up afresh, so the next process the
// kernel gives that number is not taken for the old one.
func TestCallersExitedPid(t *testing.T) {
	if _, err := unix.PidfdOpen(os.Getpid(), unix.PIDFD_THREAD); err != nil {
		if os.Getenv("CI") == "true" { // the CI machine's kernel has it
			t.Fatalf("CI=true: no pidfd_open(PIDFD_THREAD) here (Linux 6.9+): %v", err)
		}
		t.Skipf("no pidfd_open(PIDFD_THREAD) here (Linux 6.9+): %v; nothing is cached then", err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := uint32(cmd.Process.Pid)
	var asked atomic.Int32
	cs := &callers{attribute: func(p uint32) (string, string) {
		asked.Add(1)
		if p == pid && asked.Load() == 1 {
			return "r1", "coder"
		}
		return "", ""
	}}
	t.Cleanup(cs.forget)
	for range 3 {
		comm, run, agent := cs.get(pid)
		if comm != "sleep" || run != "r1" || agent != "coder" {
			t.Fatalf("get(%d) = %q %q %q, want sleep r1 coder", pid, comm, run, agent)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("a live process was attributed %d times, want once (cached)", n)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	// The number is free now; whatever gets it next is someone else.
	comm, run, _ := cs.get(pid)
	if comm == "sleep" || run == "r1" {
		t.Fatalf("after its exit pid %d is still %q in run %q", pid, comm, run)
	}
	if n := asked.Load(); n != 2 {
		t.Fatalf("the exited pid was attributed %d times in all, want 2 (looked up again)", n)
	}
}

func TestCallersForget(t *testing.T) {
	var asked atomic.Int32
	cs := &callers{attribute: func(uint32) (string, string) { asked.Add(1); return "", "" }}
	t.Cleanup(cs.forget)
	pid := uint32(os.Getpid())
	cs.get(pid)
	cs.get(pid)
	cs.forget()
	cs.get(pid)
	if _, err := unix.PidfdOpen(os.Getpid(), unix.PIDFD_THREAD); err == nil && asked.Load() != 2 {
		t.Fatalf("attributed %d times, want 2 (once, then again after forget)", asked.Load())
	}
}

// BenchmarkCaller is the per-mutation cost of naming the caller, for a
// process seen before (the common case).
func BenchmarkCaller(b *testing.B) {
	f := &FS{callers: callers{attribute: func(uint32) (string, string) { return "", "" }}}
	b.Cleanup(f.ForgetCallers)
	h := &fuse.InHeader{Caller: fuse.Caller{Owner: fuse.Owner{Uid: 0, Gid: 0}, Pid: uint32(os.Getpid())}}
	for b.Loop() {
		_ = f.caller(h)
	}
}
