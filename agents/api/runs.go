package api

import "time"

// The run methods: the daemon's half of `reynfs run`. The daemon only
// registers a run and makes its cgroup; the launcher (the CLI process, never
// the daemon, which could deadlock execing into its own mount) starts the
// command inside it, then reports its pid and its exit code.

// RunStartParams registers a run before its command starts.
type RunStartParams struct {
	Agent    string `json:"agent,omitempty"`
	Label    string `json:"label,omitempty"`
	OnRewind string `json:"on_rewind,omitempty"` // kill (the default), freeze or keep
}

func (RunStartParams) Method() string { return "run.start" }

// RunStartResult names the run and where to start its command.
type RunStartResult struct {
	Reply
	ID string `json:"id"`
	// CgroupDir is the run's cgroup, to clone the command into; empty in
	// the process-group mode, where the command leads a group of its own.
	CgroupDir string `json:"cgroup_dir,omitempty"`
	Mode      string `json:"mode"` // cgroup2 or process-group
}

// RunAttachParams names the pid of a run's first process.
type RunAttachParams struct {
	ID  string `json:"id"`
	Pid int    `json:"pid"`
}

func (RunAttachParams) Method() string { return "run.attach" }

// RunExitedParams reports the exit code of a run's first process (128+N
// for signal N).
type RunExitedParams struct {
	ID   string `json:"id"`
	Code int    `json:"code"`
}

func (RunExitedParams) Method() string { return "run.exited" }

// RunsParams lists the runs the daemon tracks.
type RunsParams struct{}

func (RunsParams) Method() string { return "runs" }
func (RunsParams) readOnly() bool { return true }

// RunsResult is every run still tracked, oldest first, and how runs are
// tracked.
type RunsResult struct {
	Reply
	Runs       []RunInfo `json:"runs"`
	Mode       string    `json:"mode"`        // cgroup2 or process-group
	ModeReason string    `json:"mode_reason"` // why (a fallback names what failed)
}

// RunInfo is one run.
type RunInfo struct {
	ID       string    `json:"id"`
	Agent    string    `json:"agent,omitempty"`
	Label    string    `json:"label,omitempty"`
	OnRewind string    `json:"on_rewind"`
	Pid      int       `json:"pid"`
	Started  time.Time `json:"started"`
	State    string    `json:"state"`     // running, frozen, exited or cancelled
	ExitCode int       `json:"exit_code"` // valid once exited or cancelled
}
