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
	ended []RunInfo          // the last MaxEnded runs Remove forgot, oldest first
}

// MaxEnded is how many ended runs (exited or cancelled, no process left)
// List still shows, beside every live one: enough to see what a rewind
// cancelled or how a recent run exited, without a workspace that runs an
// agent per prompt for a week listing thousands.
const MaxEnded = 64

// Run is one command and its whole process tree.
type Run struct {
	ID       string
	Agent    string
	Label    string
	OnRewind Policy

	runs   *Runs
	proc   *Process // when this process launched it (Start)
	dir    string   // cgroup mode: the run's cgroup
	done   chan struct{}
	finish sync.Once

	mu  sync.Mutex
	pid int // 0 until Attach
	// leaderStart is the start time of pid when Attach saw it, and
	// groupGone is set once the fallback's process group pid is seen
	// empty or led by another process: a pgid is free for reuse once its
	// group is empty, and a process anyone starts may get it (group).
	leaderStart uint64
	leader      *os.File // a pidfd of pid (nil when pidfd_open failed)
	groupGone   bool
	started     time.Time
	state       State
	exitCode    int
}

// Pid is the run's first process (its process group in the fallback); 0
// until Attach.
func (run *Run) Pid() int {
	run.mu.Lock()
	defer run.mu.Unlock()
	return run.pid
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
// in it, or falls back to process groups and says why in Mode.
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
	// The launcher (Launch) becomes the child subreaper, not Runs: it is
	// the ancestor of the run.
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
	// Checked, and removed again while it is empty: the first run makes
	// it, so a daemon killed before any run leaves no cgroup behind (one
	// with runs left by a killed daemon stays; EBUSY).
	_ = syscall.Rmdir(dir)
	r.dir = dir
	r.cgPath = filepath.Join(root, "reynfs", opts.StoreID)
	r.reason = "cgroup2 at " + dir
	return nil
}

// Mode says how runs are tracked and why (a fallback names what failed).
func (r *Runs) Mode() (Mode, string) { return r.mode, r.reason }

// Spec describes a run.
type Spec struct {
	ID       string // empty: a random one
	Agent    string // may be empty
	Label    string
	OnRewind Policy
	// Cmd is the command for Start, with its stdio, env and dir set by the
	// caller; Launch sets its cgroup or process-group fields. Create
	// ignores it.
	Cmd *exec.Cmd
}

// Create registers a run that another process will launch, the daemon's
// half of `reynfs run`: in cgroup mode it creates the run's cgroup, whose
// path (CgroupDir) the launcher passes to Launch; then Attach names the
// pid and Exited reports the exit code.
func (r *Runs) Create(spec Spec) (*Run, error) {
	if spec.Agent != "" {
		if err := CheckName(spec.Agent); err != nil {
			return nil, fmt.Errorf("create run: %w", err)
		}
	}
	pol, err := ParsePolicy(string(spec.OnRewind))
	if err != nil {
		return nil, fmt.Errorf("create run: %w", err)
	}
	id := spec.ID
	if id == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	if err := CheckName(id); err != nil {
		return nil, fmt.Errorf("create run: id: %w", err)
	}
	run := &Run{ID: id, Agent: spec.Agent, Label: spec.Label, OnRewind: pol, runs: r,
		done: make(chan struct{}), state: StateRunning, started: time.Now()}
	r.mu.Lock()
	_, dup := r.runs[id]
	if !dup {
		r.runs[id] = run // reserved before the cgroup exists
	}
	r.mu.Unlock()
	if dup {
		return nil, fmt.Errorf("create run %s: the id is taken", id)
	}
	if r.mode == ModeCgroup {
		run.dir = filepath.Join(r.dir, id)
		err := os.MkdirAll(r.dir, 0o755) // the store's cgroup, made at the first run
		if err == nil {
			err = os.Mkdir(run.dir, 0o755)
		}
		if err != nil {
			r.mu.Lock()
			delete(r.runs, id)
			r.mu.Unlock()
			return nil, fmt.Errorf("create run %s: cgroup: %w", id, err)
		}
	}
	return run, nil
}

// CgroupDir is the run's cgroup ("" in the process-group mode).
func (run *Run) CgroupDir() string { return run.dir }

// Attach records the pid of the run's first process, once its launcher
// has started it. In cgroup mode the pid must be in the run's cgroup; in
// the process-group mode it must lead its group.
func (r *Runs) Attach(run *Run, pid int) error {
	if pid <= 1 {
		return fmt.Errorf("attach run %s: bad pid %d", run.ID, pid)
	}
	// A command may have exited already (and been reaped); only a live
	// process that is demonstrably elsewhere is refused. One that exits
	// while we look (a zombie, or gone by the second read) no longer shows
	// its cgroup: what cannot be read is not held against it.
	if r.mode == ModeCgroup {
		mine := r.cgPath + "/" + run.ID
		if cg, err := cgroupOf(pid); err == nil && cg != mine && !strings.HasPrefix(cg, mine+"/") {
			return fmt.Errorf("attach run %s: pid %d is not in its cgroup (%s)", run.ID, pid, cg)
		}
	}
	if st, err := readStat(pid); err == nil && st.state != 'Z' && st.state != 'X' &&
		r.mode == ModeProcessGroup && st.pgid != pid {
		return fmt.Errorf("attach run %s: pid %d does not lead a process group", run.ID, pid)
	}
	var start uint64
	if st, err := readStat(pid); err == nil {
		start = st.start
	}
	var leader *os.File
	if fd, err := unix.PidfdOpen(pid, 0); err == nil && r.mode == ModeProcessGroup {
		leader = os.NewFile(uintptr(fd), "pidfd")
	} else if err == nil {
		unix.Close(fd)
	}
	run.mu.Lock()
	run.pid, run.started, run.leaderStart = pid, time.Now(), start
	if run.leader != nil {
		run.leader.Close()
	}
	run.leader = leader
	run.mu.Unlock()
	if r.mode == ModeProcessGroup && run.proc == nil && isSubreaper() {
		// Orphans of the run may be reparented to us (when we are an
		// ancestor of its launcher): reap them, or the group never empties.
		go reapGroup(pid, -1, nil)
	}
	return nil
}

// isSubreaper: this process adopts the orphans of its descendants.
func isSubreaper() bool {
	var v int32
	err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0)
	return err == nil && v != 0
}

// Exited records the exit code of the run's first process, as its
// launcher reports it; the run stays until Remove (its other processes
// may still be there).
func (run *Run) Exited(code int) {
	run.finish.Do(func() {
		run.mu.Lock()
		run.exitCode = code
		if run.state != StateCancelled {
			run.state = StateExited
		}
		run.mu.Unlock()
		close(run.done)
	})
}

// Start creates a run and launches spec.Cmd in it from this process.
func (r *Runs) Start(spec Spec) (*Run, error) {
	if spec.Cmd == nil {
		return nil, errors.New("start run: no command")
	}
	run, err := r.Create(spec)
	if err != nil {
		return nil, err
	}
	p, err := Launch(spec.Cmd, run.dir)
	if err == nil {
		run.proc = p
		err = r.Attach(run, p.Pid)
		if err != nil {
			_ = syscall.Kill(p.Pid, syscall.SIGKILL)
		}
	}
	if err != nil {
		if run.dir != "" {
			_ = cgRemove(run.dir)
		}
		r.mu.Lock()
		delete(r.runs, run.ID)
		r.mu.Unlock()
		return nil, fmt.Errorf("start run %s: %w", run.ID, err)
	}
	go func() { run.Exited(p.Wait()) }()
	return run, nil
}

// Info returns a snapshot of the run.
func (run *Run) Info() RunInfo {
	run.mu.Lock()
	defer run.mu.Unlock()
	return RunInfo{ID: run.ID, Agent: run.Agent, Label: run.Label, OnRewind: run.OnRewind,
		Pid: run.pid, Started: run.started, State: run.state, ExitCode: run.exitCode}
}

// Wait blocks until the first process has exited (Exited) and returns its
// exit code (128+N for signal N).
func (run *Run) Wait() int {
	<-run.done
	run.mu.Lock()
	defer run.mu.Unlock()
	return run.exitCode
}

// Done is closed when the first process has exited.
func (run *Run) Done() <-chan struct{} { return run.done }

// Signal sends sig to the run's first process; a no-op once it is gone.
func (run *Run) Signal(sig syscall.Signal) error {
	if run.proc != nil {
		return run.proc.Signal(sig)
	}
	select {
	case <-run.done:
		return nil
	default:
	}
	pid := run.Pid()
	if pid <= 1 {
		return nil // not attached yet
	}
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal run %s: %w", run.ID, err)
	}
	return nil
}

// List returns every live run and the last MaxEnded ended ones, oldest
// first. A run whose first process exited and that has no process left is
// forgotten here (Remove), so it moves to the ended ones.
func (r *Runs) List() []RunInfo {
	r.prune()
	r.mu.Lock()
	runs := make([]*Run, 0, len(r.runs))
	for _, run := range r.runs {
		runs = append(runs, run)
	}
	out := make([]RunInfo, 0, len(runs)+len(r.ended))
	out = append(out, r.ended...)
	r.mu.Unlock()
	for _, run := range runs {
		out = append(out, run.Info())
	}
	slices.SortFunc(out, func(a, b RunInfo) int { return a.Started.Compare(b.Started) })
	return out
}

// prune removes the runs that exited and have no process left.
func (r *Runs) prune() {
	r.mu.Lock()
	var done []*Run
	for _, run := range r.runs {
		select {
		case <-run.done:
			done = append(done, run)
		default:
		}
	}
	r.mu.Unlock()
	// Oldest first, so the ended list keeps the newest.
	slices.SortFunc(done, func(a, b *Run) int { return a.Info().Started.Compare(b.Info().Started) })
	for _, run := range done {
		if !run.populated() {
			_ = run.Remove() // EBUSY: a process came back; it stays live
		}
	}
}

// ended notes a run Remove forgot, keeping the last MaxEnded. Caller
// holds r.mu.
func (r *Runs) endedLocked(ri RunInfo) {
	if len(r.ended) >= MaxEnded {
		r.ended = slices.Delete(r.ended, 0, len(r.ended)-MaxEnded+1)
	}
	r.ended = append(r.ended, ri)
}

// Get returns the run with this id, or nil.
func (r *Runs) Get(id string) *Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[id]
}

// RunOfThread is RunOf for a FUSE handler answering thread tid: it must
// never wait for that thread, which is itself waiting for the answer. So
// it reads no /proc/<tid>/stat (do_task_stat can wait for a lock of the
// process that one of its threads, blocked in a FUSE request, holds: a
// rewind loop under writers with a mapped file hung the mount on it), only
// what takes no lock of the process: /proc/<tid>/cgroup in cgroup mode,
// getpgid(2) in the fallback, where a process that left the run's process
// group is therefore not found. It caches nothing; fs caches per thread.
func (r *Runs) RunOfThread(tid int) *Run {
	if tid <= 0 {
		return nil
	}
	var id string
	if r.mode == ModeCgroup {
		cg, err := cgroupOf(tid)
		if err != nil {
			return nil
		}
		rest, ok := strings.CutPrefix(cg, r.cgPath+"/")
		if !ok {
			return nil
		}
		id, _, _ = strings.Cut(rest, "/")
	} else {
		pgid, err := syscall.Getpgid(tid)
		if err != nil || pgid <= 1 {
			return nil
		}
		r.mu.Lock()
		for rid, run := range r.runs {
			if run.Pid() == pgid {
				id = rid
			}
		}
		r.mu.Unlock()
	}
	if id == "" {
		return nil
	}
	return r.Get(id)
}
