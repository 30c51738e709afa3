package agents

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Policy says what a rewind does to a run that is still going.
type Policy string

const (
	PolicyKill   Policy = "kill"   // cancel it (the default: it belongs to the abandoned future)
	PolicyFreeze Policy = "freeze" // freeze it across the swap, thaw it after
	PolicyKeep   Policy = "keep"   // leave it alone
)

// ParsePolicy accepts "" (kill), kill, freeze and keep.
func ParsePolicy(s string) (Policy, error) {
	switch Policy(s) {
	case "":
		return PolicyKill, nil
	case PolicyKill, PolicyFreeze, PolicyKeep:
		return Policy(s), nil
	}
	return "", fmt.Errorf("parse on-rewind policy %q: want kill, freeze or keep", s)
}

// State of a run.
type State string

const (
	StateRunning   State = "running"
	StateFrozen    State = "frozen"
	StateExited    State = "exited"    // its first process exited on its own
	StateCancelled State = "cancelled" // Cancel ended it
)

// Options for NewRuns.
type Options struct {
	// StoreID names the subtree, so two stores never share runs.
	StoreID string
	// Cgroup2 is the cgroup v2 directory to put the subtree under; empty
	// means the cgroup2 mount that /proc/self/mountinfo names.
	Cgroup2 string
	// ForceFallback uses process groups even where cgroup2 is writable.
	ForceFallback bool
}

// Runs starts and tracks the runs of one store.
type Runs struct {
	mode   Mode
	reason string // why this mode (shown by status)
	dir    string // cgroup mode: <cgroup2>/reynfs/<store-id>
	cgPath string // dir as /proc/<pid>/cgroup names it

	mu    sync.Mutex
	runs  map[string]*Run
	cache map[procKey]string // (pid, start time) → run id; "" = in no run
}

// Run is one command started by Start and its whole process tree.
type Run struct {
	ID       string
	Agent    string
	Label    string
	OnRewind Policy
	Pid      int
	Started  time.Time

	runs *Runs
	cmd  *exec.Cmd
	dir  string // cgroup mode: the run's cgroup
	done chan struct{}

	mu       sync.Mutex
	state    State
	exitCode int
}

// RunInfo is a snapshot of a run, for `reynfs runs` and the API.
type RunInfo struct {
	ID       string    `json:"id"`
	Agent    string    `json:"agent,omitempty"`
	Label    string    `json:"label,omitempty"`
	OnRewind Policy    `json:"on_rewind"`
	Pid      int       `json:"pid"`
	Started  time.Time `json:"started"`
	State    State     `json:"state"`
	ExitCode int       `json:"exit_code"` // valid once State is exited or cancelled
}

type procKey struct {
	pid   int
	start uint64
}

// NewRuns finds a writable cgroup2 and creates <cgroup2>/reynfs/<store-id>
// in it, or falls back to process groups (and makes this process a child
// subreaper) and says why in Mode.
func NewRuns(opts Options) (*Runs, error) {
	if opts.StoreID == "" || strings.ContainsAny(opts.StoreID, "/\x00") || opts.StoreID == "." || opts.StoreID == ".." {
		return nil, fmt.Errorf("start runs: bad store id %q", opts.StoreID)
	}
	r := &Runs{runs: map[string]*Run{}, cache: map[procKey]string{}}
	if opts.ForceFallback {
		r.reason = "process groups asked for"
	} else if err := r.openCgroup(opts); err != nil {
		r.reason = err.Error()
	} else {
		r.mode = ModeCgroup
		return r, nil
	}
	// Orphaned grandchildren reparent to us instead of init, so the run's
	// reaper can collect them and Cancel can wait for them.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("start runs: become subreaper: %w", err)
	}
	r.mode = ModeProcessGroup
	return r, nil
}

func (r *Runs) openCgroup(opts Options) error {
	base, root := opts.Cgroup2, "/"
	if base == "" {
		mi, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return fmt.Errorf("find cgroup2: %w", err)
		}
		if base, root, err = cgroup2Mount(mi); err != nil {
			return err
		}
	} else {
		// A directory inside the mount: its cgroup path is its path below
		// the mount point, which a process placed there shows.
		mi, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return fmt.Errorf("find cgroup2: %w", err)
		}
		mnt, mroot, err := cgroup2Mount(mi)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(mnt, base)
		if err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("find cgroup2: %s is not inside the cgroup2 mount %s", base, mnt)
		}
		root = filepath.Join(mroot, rel)
	}
	dir := filepath.Join(base, "reynfs", opts.StoreID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cgroup2 at %s is not writable: %w", base, err)
	}
	for _, f := range []string{"cgroup.freeze", "cgroup.kill", "cgroup.events"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("cgroup2 at %s has no %s (kernel before 5.14?)", base, f)
		}
	}
	r.dir = dir
	r.cgPath = filepath.Join(root, "reynfs", opts.StoreID)
	r.reason = "cgroup2 at " + dir
	return nil
}

// Mode says how runs are tracked and why (a fallback names what failed).
func (r *Runs) Mode() (Mode, string) { return r.mode, r.reason }

// Spec describes a run to start.
type Spec struct {
	ID       string // empty: a random one
	Agent    string // may be empty
	Label    string
	OnRewind Policy
	// Cmd is the command, with its stdio, env and dir set by the caller;
	// Start sets its SysProcAttr cgroup or process group fields.
	Cmd *exec.Cmd
}

// Start starts spec.Cmd in a run of its own. In cgroup mode the child is
// created inside the run's cgroup by clone3(CLONE_INTO_CGROUP), so no
// instruction of it, and no child it forks, is ever outside the run.
func (r *Runs) Start(spec Spec) (*Run, error) {
	if spec.Cmd == nil {
		return nil, errors.New("start run: no command")
	}
	if spec.Agent != "" {
		if err := CheckName(spec.Agent); err != nil {
			return nil, fmt.Errorf("start run: %w", err)
		}
	}
	pol, err := ParsePolicy(string(spec.OnRewind))
	if err != nil {
		return nil, fmt.Errorf("start run: %w", err)
	}
	id := spec.ID
	if id == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	if err := CheckName(id); err != nil {
		return nil, fmt.Errorf("start run: id: %w", err)
	}
	run := &Run{ID: id, Agent: spec.Agent, Label: spec.Label, OnRewind: pol, runs: r,
		cmd: spec.Cmd, done: make(chan struct{}), state: StateRunning}
	r.mu.Lock()
	_, dup := r.runs[id]
	if !dup {
		r.runs[id] = run // reserved before the process exists
	}
	r.mu.Unlock()
	if dup {
		return nil, fmt.Errorf("start run %s: the id is taken", id)
	}
	if err := r.start(run); err != nil {
		r.mu.Lock()
		delete(r.runs, id)
		r.mu.Unlock()
		return nil, fmt.Errorf("start run %s: %w", id, err)
	}
	return run, nil
}

func (r *Runs) start(run *Run) error {
	c := run.cmd
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	if r.mode == ModeCgroup {
		run.dir = filepath.Join(r.dir, run.ID)
		if err := os.Mkdir(run.dir, 0o755); err != nil {
			return fmt.Errorf("create cgroup: %w", err)
		}
		fd, err := unix.Open(run.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			_ = cgRemove(run.dir)
			return fmt.Errorf("open cgroup: %w", err)
		}
		defer unix.Close(fd)
		c.SysProcAttr.UseCgroupFD, c.SysProcAttr.CgroupFD = true, fd
	} else {
		// The group is the run; the leader's pid is its pgid.
		c.SysProcAttr.Setpgid, c.SysProcAttr.Pgid = true, 0
	}
	if err := c.Start(); err != nil {
		if run.dir != "" {
			_ = cgRemove(run.dir)
		}
		return err
	}
	run.Pid, run.Started = c.Process.Pid, time.Now()
	if r.mode == ModeProcessGroup {
		go run.reapOrphans()
	}
	go run.wait()
	return nil
}

// wait collects the first process's exit status.
func (run *Run) wait() {
	err := run.cmd.Wait()
	code := 0
	if ps := run.cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal()) // as a shell reports it
		} else {
			code = ps.ExitCode()
		}
	} else if err != nil {
		code = 127
	}
	run.mu.Lock()
	run.exitCode = code
	if run.state != StateCancelled {
		run.state = StateExited
	}
	run.mu.Unlock()
	close(run.done)
}

// reapOrphans reaps the run's processes that were orphaned to us (we are
// the subreaper), so that they do not linger as zombies in the group. It
// peeks with WNOWAIT and leaves the leader to exec.Cmd.Wait, whose status
// it must not steal; it only ever looks at this run's process group.
func (run *Run) reapOrphans() {
	pgid := run.Pid
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
		if pid == run.Pid {
			<-run.done
			continue
		}
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	}
}

// Info returns a snapshot of the run.
func (run *Run) Info() RunInfo {
	run.mu.Lock()
	defer run.mu.Unlock()
	return RunInfo{ID: run.ID, Agent: run.Agent, Label: run.Label, OnRewind: run.OnRewind,
		Pid: run.Pid, Started: run.Started, State: run.state, ExitCode: run.exitCode}
}

// Wait blocks until the first process exits and returns its exit code
// (128+N for signal N): what `reynfs run` exits with.
func (run *Run) Wait() int {
	<-run.done
	run.mu.Lock()
	defer run.mu.Unlock()
	return run.exitCode
}

// Done is closed when the first process has exited.
func (run *Run) Done() <-chan struct{} { return run.done }

// Signal forwards sig to the run's first process (what `reynfs run` does
// with the signals it receives); a no-op once that process is gone.
func (run *Run) Signal(sig syscall.Signal) error {
	select {
	case <-run.done:
		return nil
	default:
	}
	if err := syscall.Kill(run.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal run %s: %w", run.ID, err)
	}
	return nil
}

// List returns every run still tracked, oldest first.
func (r *Runs) List() []RunInfo {
	r.mu.Lock()
	runs := make([]*Run, 0, len(r.runs))
	for _, run := range r.runs {
		runs = append(runs, run)
	}
	r.mu.Unlock()
	out := make([]RunInfo, 0, len(runs))
	for _, run := range runs {
		out = append(out, run.Info())
	}
	slices.SortFunc(out, func(a, b RunInfo) int { return a.Started.Compare(b.Started) })
	return out
}

// Get returns the run with this id, or nil.
func (r *Runs) Get(id string) *Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[id]
}
