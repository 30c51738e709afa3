package agents

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Process is a run's first process as the process that started it sees
// it: `reynfs run` launches the command itself (a daemon that execs into
// its own mount can deadlock), waits for it and exits with its status.
type Process struct {
	Pid  int
	cmd  *exec.Cmd
	done chan struct{}
	code int
}

// Launch starts cmd (stdio, env and dir set by the caller) inside the run
// cgroup cgroupDir, from its first instruction, by
// clone3(CLONE_INTO_CGROUP). With cgroupDir "" (the process-group mode) it
// starts cmd as the leader of a new process group instead, makes this
// process a child subreaper and reaps the group's orphans.
func Launch(cmd *exec.Cmd, cgroupDir string) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if cgroupDir != "" {
		fd, err := unix.Open(cgroupDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("launch: open cgroup: %w", err)
		}
		defer unix.Close(fd)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	} else {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil, fmt.Errorf("launch: become subreaper: %w", err)
		}
		cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pgid = true, 0
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	p := &Process{Pid: cmd.Process.Pid, cmd: cmd, done: make(chan struct{})}
	if cgroupDir == "" {
		go reapGroup(p.Pid, p.Pid, p.done)
	}
	go p.wait()
	return p, nil
}

// wait collects the exit status.
func (p *Process) wait() {
	err := p.cmd.Wait()
	if ps := p.cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.code = 128 + int(ws.Signal()) // as a shell reports it
		} else {
			p.code = ps.ExitCode()
		}
	} else if err != nil {
		p.code = 127
	}
	close(p.done)
}

// Wait blocks until the process exits and returns its exit code (128+N
// for a death by signal N): what `reynfs run` exits with.
func (p *Process) Wait() int {
	<-p.done
	return p.code
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Signal forwards sig (what `reynfs run` does with the signals it
// receives); a no-op once the process is gone.
func (p *Process) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := syscall.Kill(p.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %d: %w", p.Pid, err)
	}
	return nil
}

// reapGroup reaps the processes of group pgid that were orphaned to us (we
// are a subreaper), so they do not linger as zombies that keep the group
// alive. It peeks with WNOWAIT and leaves the leader (if it is our child)
// to exec.Cmd.Wait, whose status it must not steal: for the leader it
// waits for leaderDone instead. It only ever looks at this one group, and
// returns when the group is gone.
func reapGroup(pgid, leader int, leaderDone <-chan struct{}) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PGID, pgid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // ECHILD: no child of ours in the group now
			if syscall.Kill(-pgid, 0) != nil {
				return // the group is gone
			}
			time.Sleep(20 * time.Millisecond) // grandchildren may be orphaned to us later
			continue
		}
		// si_pid follows signo, errno, code and padding (4 int32s).
		pid := int(*(*int32)(unsafe.Add(unsafe.Pointer(&info), 16)))
		if pid == leader {
			<-leaderDone
			continue
		}
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	}
}
