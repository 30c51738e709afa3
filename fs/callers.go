package fs

import (
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Attributor names the `reynfs run` (and its agent) that a process or
// thread id belongs to, "" for none. fs/ cannot know runs (agents/ is
// above it), so the daemon hands one in (Options.Attribute). It runs in
// the FUSE handler of that thread's request, so it must never wait for
// the thread: no /proc/<pid>/stat, whose reader can wait for a lock the
// blocked process holds (agents.Runs.RunOfThread).
type Attributor func(pid uint32) (run, agent string)

// callers caches who is behind the thread id of a FUSE request: its
// command name and run. Every mutation asks, so a hit must be cheap; and a
// pid the kernel gives to a new process after the old one exited must not
// be taken for the old one (it would get its command, its run, and, if a
// rewind cancelled that run, its writes refused).
//
// Each entry holds a pidfd of the thread (pidfd_open with PIDFD_THREAD,
// Linux 6.9): it becomes readable when that very thread exits, and it can
// never refer to a later holder of the same number. A hit polls it (one
// system call, no /proc read); an exited thread's entry is dropped and the
// id looked up afresh. Where no pidfd can be had (an older kernel, a thread
// that exited already) nothing is cached and every request reads /proc.
type callers struct {
	attribute Attributor // nil: no runs

	mu sync.Mutex // held across the poll, so no entry's fd is closed under it
	m  map[uint32]*callerEntry
}

type callerEntry struct {
	comm, run, agent string
	fd               int // pidfd of the thread
}

// maxCallers bounds the cache (and so the pidfds it holds); it is emptied
// when full.
const maxCallers = 1024

// get returns the command name, run and agent of thread id pid.
func (cs *callers) get(pid uint32) (comm, run, agent string) {
	cs.mu.Lock()
	if e := cs.m[pid]; e != nil {
		if alive(e.fd) {
			cs.mu.Unlock()
			return e.comm, e.run, e.agent
		}
		delete(cs.m, pid)
		_ = unix.Close(e.fd)
	}
	cs.mu.Unlock()

	fd, err := unix.PidfdOpen(int(pid), unix.PIDFD_THREAD)
	if err != nil {
		fd = -1
	}
	b, _ := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/comm")
	comm = strings.TrimSpace(string(b))
	if cs.attribute != nil {
		run, agent = cs.attribute(pid)
	}
	// The pidfd was opened before the reads: if the thread is still there
	// after them, they read that thread and the entry is exact.
	if fd < 0 || !alive(fd) {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
		return comm, run, agent
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.m == nil || len(cs.m) >= maxCallers {
		cs.clearLocked()
	}
	if old := cs.m[pid]; old != nil { // another request of it got here first
		_ = unix.Close(old.fd)
	}
	cs.m[pid] = &callerEntry{comm: comm, run: run, agent: agent, fd: fd}
	return comm, run, agent
}

// forget drops every entry: the daemon calls it when a run attaches, since
// a process the fallback mode resolved as "in no run" may belong to it now.
func (cs *callers) forget() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.clearLocked()
}

func (cs *callers) clearLocked() {
	for _, e := range cs.m {
		_ = unix.Close(e.fd)
	}
	cs.m = map[uint32]*callerEntry{}
}

// alive: the thread behind pidfd fd has not exited.
func alive(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(p, 0)
	return err == nil && n == 0
}
