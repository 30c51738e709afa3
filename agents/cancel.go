package agents

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// FreezeTimeout bounds the wait for a freeze to take: a task in an
// uninterruptible sleep (a FUSE request the daemon has not answered, for
// one) freezes only when it returns to user space.
const FreezeTimeout = 5 * time.Second

// EmptyTimeout bounds the wait, after a kill, for the run to be empty.
const EmptyTimeout = 5 * time.Second

// Freeze stops every process of the run where it stands (cgroup.freeze,
// or SIGSTOP to the process group) and waits, at most FreezeTimeout,
// until all are stopped: after it returns nil, the run issues no new
// system call, so no new write of it reaches the mount.
func (run *Run) Freeze() error {
	if err := run.freeze(); err != nil {
		return err
	}
	run.setState(StateFrozen)
	return nil
}

func (run *Run) freeze() error {
	if run.dir != "" {
		if err := cgWrite(run.dir, "cgroup.freeze", "1"); err != nil {
			return fmt.Errorf("freeze run %s: %w", run.ID, err)
		}
		err := cgWait(run.dir, FreezeTimeout, "freeze", func(p, f bool) bool { return f || !p })
		if err != nil {
			return fmt.Errorf("freeze run %s: %w", run.ID, err)
		}
		return nil
	}
	if err := killGroup(run.group(), syscall.SIGSTOP); err != nil {
		return fmt.Errorf("freeze run %s: %w", run.ID, err)
	}
	if err := groupWait(run.group(), FreezeTimeout, "stop", groupStopped); err != nil {
		return fmt.Errorf("freeze run %s: %w", run.ID, err)
	}
	return nil
}

// Thaw lets a frozen run go on.
func (run *Run) Thaw() error {
	if err := run.thaw(); err != nil {
		return err
	}
	run.mu.Lock()
	if run.state == StateFrozen {
		run.state = StateRunning
		select {
		case <-run.done:
			run.state = StateExited
		default:
		}
	}
	run.mu.Unlock()
	return nil
}

func (run *Run) thaw() error {
	if run.dir != "" {
		if err := cgWrite(run.dir, "cgroup.freeze", "0"); err != nil {
			return fmt.Errorf("thaw run %s: %w", run.ID, err)
		}
		return nil
	}
	if err := killGroup(run.group(), syscall.SIGCONT); err != nil {
		return fmt.Errorf("thaw run %s: %w", run.ID, err)
	}
	return nil
}

// Cancel ends the run and every process in it, in this order:
//
//  1. freeze: the tree stops forking and writing at once, so the list of
//     its processes is complete and stable;
//  2. SIGTERM to each of them, while frozen (the signal waits, pending);
//  3. thaw, and let them handle it for at most grace;
//  4. if any is left: cgroup.kill (SIGKILL to the group in the fallback),
//     which a process cannot catch or escape by forking;
//  5. wait, bounded, until the run is empty; remove its cgroup.
//
// Writes made during the grace period are harmless to a rewind: it calls
// Cancel before it appends its reset record, so they land in the future the
// record abandons. What no order can give is a write after the record,
// and Cancel returns only once the run is empty. grace <= 0 skips 2-3.
// The caller must still wait for the FUSE requests the run had in flight.
func (run *Run) Cancel(grace time.Duration) error {
	run.setState(StateCancelled)
	if err := run.freeze(); err != nil && !errors.Is(err, ErrTimeout) {
		return fmt.Errorf("cancel: %w", err)
	}
	if grace > 0 {
		if err := run.terminate(); err != nil {
			return fmt.Errorf("cancel run %s: %w", run.ID, err)
		}
		if err := run.thaw(); err != nil {
			return fmt.Errorf("cancel: %w", err)
		}
		if run.waitEmpty(grace) == nil {
			return run.Remove()
		}
	}
	if err := run.kill(); err != nil {
		return fmt.Errorf("cancel run %s: %w", run.ID, err)
	}
	if err := run.waitEmpty(EmptyTimeout); err != nil {
		return fmt.Errorf("cancel run %s: %w", run.ID, err)
	}
	return run.Remove()
}

// terminate sends SIGTERM to every process of the run.
func (run *Run) terminate() error {
	if run.dir == "" {
		return killGroup(run.group(), syscall.SIGTERM)
	}
	return cgWalk(run.dir, func(dir string) error {
		pids, err := cgProcs(dir)
		if err != nil {
			return err
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
				return err
			}
		}
		return nil
	})
}

func (run *Run) kill() error {
	if run.dir == "" {
		if err := killGroup(run.group(), syscall.SIGKILL); err != nil {
			return err
		}
		return killGroup(run.group(), syscall.SIGCONT) // harmless; SIGKILL wakes stopped tasks anyway
	}
	return cgWrite(run.dir, "cgroup.kill", "1")
}

// waitEmpty waits until no process is left in the run. In cgroup mode that
// is cgroup.events "populated 0" (which also waits for zombies to be
// reaped: our reaper is exec.Cmd.Wait for the first process, and init or a
// subreaper for the others).
func (run *Run) waitEmpty(d time.Duration) error {
	if run.dir != "" {
		return cgWait(run.dir, d, "exit", func(p, _ bool) bool { return !p })
	}
	end := time.Now().Add(d)
	for pg := run.group(); pg > 1; pg = run.group() { // 0: not attached, or the group is gone
		if time.Now().After(end) {
			return fmt.Errorf("wait for exit of process group %d: %w after %v", pg, ErrTimeout, d)
		}
		time.Sleep(pollEvery)
	}
	return nil
}

// Remove forgets a run whose processes are all gone and removes its cgroup
// (EBUSY, as an error, while a process is left in it); List still shows it
// among the last MaxEnded ended runs.
func (run *Run) Remove() error {
	if run.dir != "" {
		if err := cgRemove(run.dir); err != nil {
			return fmt.Errorf("remove run %s: %w", run.ID, err)
		}
	} else if run.group() > 1 {
		return fmt.Errorf("remove run %s: %w", run.ID, syscall.EBUSY)
	}
	r := run.runs
	info := run.Info()
	run.mu.Lock()
	if run.leader != nil {
		run.leader.Close()
		run.leader = nil
	}
	run.mu.Unlock()
	r.mu.Lock()
	if r.runs[run.ID] == run {
		delete(r.runs, run.ID)
		r.endedLocked(info)
	}
	for k, id := range r.cache {
		if id == run.ID {
			delete(r.cache, k)
		}
	}
	r.mu.Unlock()
	return nil
}

func (run *Run) setState(s State) {
	run.mu.Lock()
	run.state = s
	run.mu.Unlock()
}

// killGroup signals a process group; a group already gone is not an error.
// pgid 0 (a run not attached yet, so without a process) is a no-op:
// kill(0) would signal our own group.
func killGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return nil
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process group %d: %w", pgid, err)
	}
	return nil
}

// maxAncestry bounds the walk up the parent chain in the fallback.
const maxAncestry = 64

// maxCache bounds the attribution cache; it is cleared when full.
const maxCache = 1 << 14

// RunOf returns the run that pid (a process or thread id, as a FUSE request
// carries it) belongs to, or nil. A cache entry is keyed on the pid and the
// start time of its process, so a pid the kernel gives to a new process
// after the old one exited is never taken for the old one's run.
func (r *Runs) RunOf(pid int) *Run {
	st, err := readStat(pid)
	if err != nil {
		return nil // gone: nothing to attribute to
	}
	key := procKey{pid, st.start}
	r.mu.Lock()
	id, ok := r.cache[key]
	r.mu.Unlock()
	if !ok {
		id = r.resolve(pid, st)
		// Only cache what is still the same process: if it exited while we
		// read, its pid may already name another one.
		if now, err := readStat(pid); err == nil && now.start == st.start {
			r.mu.Lock()
			if len(r.cache) >= maxCache {
				clear(r.cache)
			}
			r.cache[key] = id
			r.mu.Unlock()
		}
	}
	if id == "" {
		return nil
	}
	return r.Get(id)
}

// resolve finds the run id of pid without the cache ("" for none).
func (r *Runs) resolve(pid int, st procStat) string {
	if r.mode == ModeCgroup {
		cg, err := cgroupOf(pid)
		if err != nil {
			return ""
		}
		rest, ok := strings.CutPrefix(cg, r.cgPath+"/")
		if !ok {
			return ""
		}
		id, _, _ := strings.Cut(rest, "/")
		return id
	}
	r.mu.Lock()
	runs := make([]*Run, 0, len(r.runs))
	for _, run := range r.runs {
		runs = append(runs, run)
	}
	r.mu.Unlock()
	leaders := map[int]string{}
	for _, run := range runs {
		if pg := run.group(); pg > 1 { // not a group that merely reuses its id
			leaders[pg] = run.ID
		}
	}
	for range maxAncestry {
		if id, ok := leaders[st.pgid]; ok {
			return id
		}
		if id, ok := leaders[pid]; ok {
			return id
		}
		if st.ppid <= 1 {
			return ""
		}
		pid = st.ppid
		var err error
		if st, err = readStat(pid); err != nil {
			return ""
		}
	}
	return ""
}

// group is the run's process group in the fallback, or 0 when it has none
// (not attached yet) or none any more. A pgid is free once its group is
// empty, and the kernel may give it to any new process (another user's
// too) that then calls setsid: signalling that group on a rewind would
// stop or kill processes that are not the run's, and attributing its
// writes would name the run for someone else's work. So the group counts
// as gone, for good, once it is seen empty or once its leader's pid is a
// process other than the one Attach saw.
//
// The leader's pidfd decides, and is asked before /proc: while the leader
// is not reaped (alive, exiting or a zombie) pid pg is its, so the group
// pg is the run's. Once it is reaped, pid pg stays taken as long as the
// group has a member, so a process found at pid pg after that is another
// one, and the run's group emptied meanwhile. (Reading /proc first raced
// the reap: the exiting leader was seen at pg, was reaped, and the pidfd
// then answered ESRCH, so a group whose members still ran was called gone
// and a cancel stopped waiting for them.) Without a pidfd the start time,
// in clock ticks, tells the leader from a later process.
func (run *Run) group() int {
	run.mu.Lock()
	pg, start, leader, gone := run.pid, run.leaderStart, run.leader, run.groupGone
	run.mu.Unlock()
	if pg <= 1 || gone {
		return 0
	}
	err := syscall.Kill(-pg, 0)
	gone = errors.Is(err, syscall.ESRCH)
	if !gone && leader != nil {
		if errors.Is(unix.PidfdSendSignal(int(leader.Fd()), 0, nil, 0), syscall.ESRCH) {
			_, serr := readStat(pg)
			gone = serr == nil
		}
	} else if !gone {
		if st, serr := readStat(pg); serr == nil {
			gone = start != 0 && st.start != start
		}
	}
	if !gone {
		return pg
	}
	run.mu.Lock()
	run.groupGone = true
	run.mu.Unlock()
	return 0
}
