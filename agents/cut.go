package agents

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// DefaultGrace is how long a cancelled run has to handle SIGTERM before
// cgroup.kill (issue 9: 2 s).
const DefaultGrace = 2 * time.Second

// Stopped is what StopForRewind did, for the rewind's report.
type Stopped struct {
	Cancelled []RunInfo // policy kill: gone
	Frozen    []RunInfo // policy freeze: frozen until Resume
	Kept      []RunInfo // policy keep: left alone
}

// StopForRewind applies each live run's on-rewind policy before a rewind
// appends its reset record: runs with policy kill are cancelled, all at
// once so that n runs cost one grace period, not n; runs with policy
// freeze are frozen. It returns when every cancelled run is empty (or
// with the errors of those that are not: the rewind must not proceed
// then). Runs whose first process has exited are cancelled too, since
// their children may still be writing.
func (r *Runs) StopForRewind(grace time.Duration) (Stopped, error) {
	var out Stopped
	var toCancel, toFreeze []*Run
	r.mu.Lock()
	for _, run := range r.runs {
		switch run.OnRewind {
		case PolicyFreeze:
			toFreeze = append(toFreeze, run)
		case PolicyKeep:
			out.Kept = append(out.Kept, run.Info())
		default:
			toCancel = append(toCancel, run)
		}
	}
	r.mu.Unlock()

	// Freeze the kept-alive runs first and cancel the rest concurrently.
	var wg sync.WaitGroup
	errs := make([]error, len(toCancel)+len(toFreeze))
	for i, run := range toFreeze {
		wg.Go(func() { errs[i] = run.Freeze() })
	}
	for i, run := range toCancel {
		wg.Go(func() { errs[len(toFreeze)+i] = run.Cancel(grace) })
	}
	wg.Wait()
	for i, run := range toFreeze {
		if errs[i] == nil {
			out.Frozen = append(out.Frozen, run.Info())
		}
	}
	for i, run := range toCancel {
		if errs[len(toFreeze)+i] == nil {
			out.Cancelled = append(out.Cancelled, run.Info())
		}
	}
	sortInfos(out.Cancelled)
	sortInfos(out.Frozen)
	sortInfos(out.Kept)
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("stop runs for rewind: %w", err)
	}
	return out, nil
}

// Resume thaws the runs StopForRewind froze, after the swap (their file
// handles from before it already fail with ESTALE).
func (r *Runs) Resume(s Stopped) error {
	var errs []error
	for _, ri := range s.Frozen {
		if run := r.Get(ri.ID); run != nil {
			errs = append(errs, run.Thaw())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("resume runs after rewind: %w", err)
	}
	return nil
}

// Active returns the runs that still have a process (their first process,
// or in cgroup mode any other): what `--no-cancel` checks before refusing
// a rewind with runs_active.
func (r *Runs) Active() []RunInfo {
	var out []RunInfo
	for _, ri := range r.List() {
		run := r.Get(ri.ID)
		if run != nil && run.populated() {
			out = append(out, ri)
		}
	}
	return out
}

// populated: some process of the run is left.
func (run *Run) populated() bool {
	if run.dir != "" {
		p, _, err := cgEvents(run.dir)
		if errors.Is(err, os.ErrNotExist) {
			return false // removed
		}
		return err != nil || p // unreadable: assume the worst
	}
	return run.waitEmpty(0) != nil
}

func sortInfos(s []RunInfo) {
	slices.SortFunc(s, func(a, b RunInfo) int { return a.Started.Compare(b.Started) })
}

// Close removes the store's cgroup (<cgroup2>/reynfs/<store-id>) when no
// run is left in the registry, and the shared reynfs/ parent if no other
// store uses it; with runs left it fails and changes nothing.
func (r *Runs) Close() error {
	r.mu.Lock()
	n := len(r.runs)
	r.mu.Unlock()
	if n > 0 {
		return fmt.Errorf("close runs: %d runs left", n)
	}
	if r.dir == "" {
		return nil
	}
	if err := syscall.Rmdir(r.dir); err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("close runs: %w", err)
	}
	_ = syscall.Rmdir(filepath.Dir(r.dir)) // EBUSY while another store has runs
	return nil
}
