package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/agents/api"
)

// openRuns starts the registry of the runs of this store. The subtree is
// named after the store's absolute path, so two stores mounted at once
// never share a cgroup, and a store remounted finds the same name.
func openRuns(store string) (*agents.Runs, error) {
	abs, err := filepath.Abs(store)
	if err != nil {
		return nil, fmt.Errorf("open runs: %w", err)
	}
	sum := sha256.Sum256([]byte(abs))
	return agents.NewRuns(agents.Options{StoreID: hex.EncodeToString(sum[:8])})
}

// closeRuns forgets the runs whose processes are all gone and removes the
// store's cgroup; a run with a process left keeps it (logged), since
// removing a populated cgroup fails anyway.
func (d *Daemon) closeRuns() {
	for _, ri := range d.runs.List() {
		if run := d.runs.Get(ri.ID); run != nil {
			if err := run.Remove(); err != nil {
				d.log.Warn().Err(err).Msg("unmount")
			}
		}
	}
	if err := d.runs.Close(); err != nil {
		d.log.Warn().Err(err).Msg("unmount")
	}
}

// runOf finds a run by id for run.attach and run.exited.
func (d *Daemon) runOf(id string) (*agents.Run, error) {
	run := d.runs.Get(id)
	if run == nil {
		return nil, fmt.Errorf("%w: no run %q", ErrUsage, id)
	}
	return run, nil
}

func (d *Daemon) runStart(p api.RunStartParams) (*api.RunStartResult, error) {
	pol, err := agents.ParsePolicy(p.OnRewind)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	run, err := d.runs.Create(agents.Spec{Agent: p.Agent, Label: p.Label, OnRewind: pol})
	if err != nil {
		return nil, err
	}
	mode, _ := d.runs.Mode()
	d.log.Info().Str("run", run.ID).Str("agent", run.Agent).Str("on_rewind", string(pol)).Msg("run created")
	return &api.RunStartResult{ID: run.ID, CgroupDir: run.CgroupDir(), Mode: string(mode)}, nil
}

func (d *Daemon) runAttach(p api.RunAttachParams) (*api.EmptyResult, error) {
	run, err := d.runOf(p.ID)
	if err != nil {
		return nil, err
	}
	if err := d.runs.Attach(run, p.Pid); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return &api.EmptyResult{}, nil
}

func (d *Daemon) runExited(p api.RunExitedParams) (*api.EmptyResult, error) {
	run, err := d.runOf(p.ID)
	if err != nil {
		return nil, err
	}
	run.Exited(p.Code)
	d.log.Info().Str("run", run.ID).Int("code", p.Code).Msg("run exited")
	return &api.EmptyResult{}, nil
}

func (d *Daemon) listRuns() *api.RunsResult {
	mode, why := d.runs.Mode()
	r := &api.RunsResult{Runs: []api.RunInfo{}, Mode: string(mode), ModeReason: why}
	for _, ri := range d.runs.List() {
		r.Runs = append(r.Runs, api.RunInfo{ID: ri.ID, Agent: ri.Agent, Label: ri.Label, OnRewind: string(ri.OnRewind),
			Pid: ri.Pid, Started: ri.Started, State: string(ri.State), ExitCode: ri.ExitCode})
	}
	return r
}

// callRun answers the run methods of a mounted workspace.
func (d *Daemon) callRun(method string, raw json.RawMessage) (api.Result, error) {
	switch method {
	case api.RunStartParams{}.Method():
		p, err := params[api.RunStartParams](raw)
		if err != nil {
			return nil, err
		}
		return result(d.runStart(p))
	case api.RunAttachParams{}.Method():
		p, err := params[api.RunAttachParams](raw)
		if err != nil {
			return nil, err
		}
		return result(d.runAttach(p))
	case api.RunExitedParams{}.Method():
		p, err := params[api.RunExitedParams](raw)
		if err != nil {
			return nil, err
		}
		return result(d.runExited(p))
	}
	return d.listRuns(), nil
}

// result keeps a nil reply a nil interface: dispatch asks a non-nil one
// for its head, and a typed nil pointer would panic there.
func result[R api.Result](r R, err error) (api.Result, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}
