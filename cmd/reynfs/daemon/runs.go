package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/rewind"
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

// closeRuns ends the workspace's runs with its mount: a run still going
// is cancelled as a rewind would (SIGTERM, the grace period, then killed),
// since what it writes now would land in the directory behind reynfs's
// back; then the runs are forgotten and the store's cgroup removed. A run
// that cannot be emptied keeps its cgroup (logged).
func (d *Daemon) closeRuns() {
	d.cancelRuns()
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

// cancelRuns cancels every run still going (SIGTERM, the grace period,
// then killed), as a rewind would.
func (d *Daemon) cancelRuns() {
	for _, ri := range d.runs.Active() {
		if run := d.runs.Get(ri.ID); run != nil {
			d.log.Warn().Str("run", ri.ID).Int("pid", ri.Pid).Msg("unmount: cancelling a run still going")
			if err := run.Cancel(agents.DefaultGrace); err != nil {
				d.log.Warn().Err(err).Msg("unmount")
			}
		}
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
	if mode, _ := d.runs.Mode(); mode == agents.ModeProcessGroup {
		// Membership follows the process group, known only now: a process
		// of the run seen before (as in no run) is looked up again.
		if d.fs != nil { // nil in tests that serve no mount
			d.fs.ForgetCallers()
		}
	}
	d.runEvent(api.EventRunStarted, run)
	return &api.EmptyResult{}, nil
}

func (d *Daemon) runExited(p api.RunExitedParams) (*api.EmptyResult, error) {
	run, err := d.runOf(p.ID)
	if err != nil {
		return nil, err
	}
	run.Exited(p.Code)
	d.runEvent(api.EventRunExited, run)
	d.log.Info().Str("run", run.ID).Int("code", p.Code).Msg("run exited")
	return &api.EmptyResult{}, nil
}

func (d *Daemon) listRuns() *api.RunsResult {
	mode, why := d.runs.Mode()
	r := &api.RunsResult{Runs: []api.RunInfo{}, Mode: string(mode), ModeReason: why}
	r.Runs = append(r.Runs, runInfos(d.runs.List(), nil)...)
	return r
}

// runInfos converts runs for the API, only those in keep when it is set.
func runInfos(ris []agents.RunInfo, keep map[string]bool) []api.RunInfo {
	var out []api.RunInfo
	for _, ri := range ris {
		if keep == nil || keep[ri.ID] {
			out = append(out, api.RunInfo{ID: ri.ID, Agent: ri.Agent, Label: ri.Label, OnRewind: string(ri.OnRewind),
				Pid: ri.Pid, Started: ri.Started, State: string(ri.State), ExitCode: ri.ExitCode})
		}
	}
	return out
}

// rewind is a rewind of the mounted workspace (ADR-0038 D2/D4): first the
// runs of the abandoned future are stopped, outside every lock (a freeze
// waits for FUSE requests in flight, which may wait for the live lock the
// rewind takes), and only once the cancelled ones are empty the reset
// record, swap and invalidation; then the frozen runs are thawed. The
// target is resolved first, so that a bad one cancels nothing.
//
// The cancelled runs are marked in the live tree (CancelRuns) before the
// reset record is appended: from then on a request of theirs that was
// still in flight, or one of a process the cancel missed, is refused
// (ESTALE) instead of journaled after the reset.
//
// While it runs, the workspace is the rewind's: another rewind, a restore
// or a checkpoint gets rewind_in_progress (notRewinding).
func (d *Daemon) rewind(p api.RewindParams) (*api.RewindResult, error) {
	release, err := d.hold("rewind")
	if err != nil {
		return nil, err
	}
	defer release()
	seq, err := rewind.Resolve(d.j, p.Target)
	if err != nil {
		return nil, err
	}
	return d.rewindAs(seq, p.NoCancel, "")
}

// hold takes the workspace for a rewind, or for an operation that may be
// one (undo, redo, checkout): what is a rewind underneath must exclude a
// second one as a plain rewind does. Its caller calls release when done.
func (d *Daemon) hold(what string) (release func(), err error) {
	if !d.rewinding.CompareAndSwap(0, time.Now().UnixNano()) {
		return nil, d.notRewinding(what)
	}
	return func() { d.rewinding.Store(0) }, nil
}

// rewindAs is rewind to seq with the label of its reset record (the
// operation it is: ops.go's undo, redo and checkout use it). Its caller
// holds the workspace (hold).
func (d *Daemon) rewindAs(seq uint64, noCancel bool, label string) (*api.RewindResult, error) {
	var active []agents.RunInfo // runs with a process left, keep excluded
	for _, ri := range d.runs.Active() {
		if ri.OnRewind != agents.PolicyKeep {
			active = append(active, ri)
		}
	}
	if noCancel && len(active) > 0 {
		ids := make([]string, len(active))
		for i, ri := range active {
			ids[i] = ri.ID
		}
		return nil, &api.Error{Code: api.CodeServer,
			Message: fmt.Sprintf("rewind: %d runs active (%s) and --no-cancel: not cancelling them", len(ids), strings.Join(ids, ", ")),
			Data:    api.ErrorData{Kind: api.KindRunsActive, Exit: api.KindRunsActive.Exit()}}
	}
	r := &api.RewindResult{}
	if !noCancel {
		stopped, err := d.runs.StopForRewind(agents.DefaultGrace)
		if err != nil {
			if rerr := d.runs.Resume(stopped); rerr != nil {
				d.log.Warn().Err(rerr).Msg("rewind")
			}
			return nil, fmt.Errorf("rewind: %w", err)
		}
		defer func() {
			if err := d.runs.Resume(stopped); err != nil {
				d.log.Warn().Err(err).Msg("rewind")
			}
		}()
		ids := make([]string, len(stopped.Cancelled))
		for i, ri := range stopped.Cancelled {
			ids[i] = ri.ID
		}
		d.live.CancelRuns(ids)
		// A run whose processes had all exited is forgotten, not named.
		was := map[string]bool{}
		for _, ri := range active {
			was[ri.ID] = true
		}
		r.Cancelled, r.Frozen = runInfos(stopped.Cancelled, was), runInfos(stopped.Frozen, was)
		r.Kept = runInfos(stopped.Kept, nil)
	}
	var err error
	r.Rewind, err = d.svc.RW.RewindAs(seq, false, label)
	if err != nil {
		return nil, err
	}
	// The swap left the old tree and the reconstruction's garbage behind.
	d.mem.after("rewind")
	for _, ri := range r.Cancelled {
		d.log.Info().Str("run", ri.ID).Msg("rewind cancelled the run")
	}
	return r, nil
}

// notRewinding refuses what must not run while a rewind holds the
// workspace: a second rewind (it would stop the runs again and rewind from
// a state the first is replacing), a restore, or a checkpoint. A
// checkpoint is refused rather than made to wait: it would otherwise cut,
// after the swap, the rewound tree under the label its caller meant for
// the state it saw, which the rewind is abandoning.
func (d *Daemon) notRewinding(what string) error {
	since := d.rewinding.Load()
	if since == 0 {
		return nil
	}
	held := time.Since(time.Unix(0, since)).Round(time.Millisecond)
	return &api.Error{Code: api.CodeServer,
		Message: fmt.Sprintf("%s: a rewind has held the workspace for %v; try again once it is done", what, held),
		Data:    api.ErrorData{Kind: api.KindRewindInProgress, Exit: api.KindRewindInProgress.Exit()}}
}

// attribute names the run and agent of a FUSE request's thread id, for the
// journal (fs.Options.Attribute).
func (d *Daemon) attribute(pid uint32) (run, agent string) {
	if r := d.runs.RunOfThread(int(pid)); r != nil {
		return r.ID, r.Agent
	}
	return "", ""
}

// origin names the process behind a control request (its pid from
// SO_PEERCRED) and its run, for the agent state it saves or the
// generation it cuts; either is refused, under the live lock, if a rewind
// cancelled that run (the client may have been killed with it after its
// request was read). The run comes from RunOfThread, which reads no
// /proc/PID/stat (that read can hang on a process exec'ing from a dead
// mount).
func (d *Daemon) origin(peer int32) agents.Origin {
	if peer <= 0 {
		return agents.Origin{}
	}
	o := agents.Origin{Pid: uint32(peer)}
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(int(peer)) + "/comm")
	o.Comm = strings.TrimSpace(string(b))
	if run := d.runs.RunOfThread(int(peer)); run != nil {
		o.Run, o.Agent = run.ID, run.Agent
		if d.live != nil {
			o.Check = func() error { return d.live.RefuseRunLocked(run.ID) }
		}
	}
	return o
}

// onlyRun keeps the records of one run in a log, and the generations that
// have any (log --run).
func onlyRun(l *LogResult, run string) {
	gens := l.Gens[:0]
	for _, g := range l.Gens {
		recs := g.Records[:0]
		for _, rec := range g.Records {
			if rec.Run == run {
				recs = append(recs, rec)
			}
		}
		if g.Records = recs; len(recs) > 0 {
			gens = append(gens, g)
		}
	}
	l.Gens = gens
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

// runBroker hands run events to the subscriptions: they are no journal
// records, so the tails cannot read them from the journal.
type runBroker struct {
	mu   sync.Mutex
	subs map[*runSub]struct{}
}

// runSub is one subscription's queue; lost is closed when it overflowed
// (the subscription then ends with dropped, as for the journal's events).
type runSub struct {
	ch   chan api.Event
	lost chan struct{}
}

func (b *runBroker) add() *runSub {
	s := &runSub{ch: make(chan api.Event, 64), lost: make(chan struct{})}
	b.mu.Lock()
	if b.subs == nil {
		b.subs = map[*runSub]struct{}{}
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

func (b *runBroker) remove(s *runSub) {
	b.mu.Lock()
	delete(b.subs, s)
	b.mu.Unlock()
}

// publish never waits: a subscription whose queue is full is marked lost.
func (b *runBroker) publish(ev api.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		select {
		case s.ch <- ev:
		default:
			select {
			case <-s.lost:
			default:
				close(s.lost)
			}
		}
	}
}

// runEvent publishes a run.* event for run.
func (d *Daemon) runEvent(typ string, run *agents.Run) {
	h, err := headOf(d.j)
	if err != nil {
		d.log.Warn().Err(err).Msg("run event: read the head")
	}
	ri := runInfos([]agents.RunInfo{run.Info()}, nil)[0]
	d.runEvents.publish(api.Event{Type: typ, Head: h, Run: &ri})
}
