package daemon

import (
	"fmt"
	"sync"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// Live retention: while mounted, the daemon runs the store's collector
// every policy period (rewind/collect.go), and `reynfs gc` runs the same
// collector on demand, mounted or not. One collection runs at a time; the
// daemon's finish stops the loop and waits for a running one before it
// closes the store.

// collectPause is the rest between two sweep batches (or value-log GC
// runs) of a mounted collection, so it never holds the disk for long.
const collectPause = 2 * time.Millisecond

// collectPoll bounds how long a policy change (retention set) takes to
// reach the loop.
const collectPoll = 5 * time.Second

// collecting serializes collections on one journal; stopped is set once
// the store is closing.
type collecting struct {
	mu      sync.Mutex
	stopped bool
}

type collectingKey struct{}

func collectingOf(j *journal.Journal) *collecting {
	return j.Attached(collectingKey{}, func() any { return &collecting{} }).(*collecting)
}

// stopCollector waits for a running collection and refuses later ones.
func stopCollector(j *journal.Journal) {
	c := collectingOf(j)
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
}

// GC runs the collector: the store's policy, or with keep > 0 the newest
// keep generations of the current path and all after the oldest of them.
// Mounted, writers go on meanwhile.
func (s *Service) GC(keep int, dry bool) (*rewind.RetainResult, error) {
	return s.collect(rewind.CollectOptions{Keep: keep, Dry: dry})
}

func (s *Service) collect(o rewind.CollectOptions) (*rewind.RetainResult, error) {
	keep := o.Keep
	c := collectingOf(s.J)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, fmt.Errorf("gc: %w", journal.ErrClosed)
	}
	var extra []cas.Hash
	for _, key := range []string{metaDirBase, metaWriteback} {
		b, err := s.J.GetMeta(key)
		if err != nil {
			return nil, err
		}
		if len(b) > 0 {
			h, err := cas.Parse(string(b))
			if err != nil {
				return nil, fmt.Errorf("store meta %s: %w", key, err)
			}
			extra = append(extra, h)
		}
	}
	o.Extra = extra
	holds, err := recordHolds(s.J) // remotes that lack records (sync.go)
	if err != nil {
		return nil, err
	}
	o.Holds = holds
	dir := s.J.DB().Opts().Dir
	before := storeBytes(dir)
	var res *rewind.RetainResult
	if s.RW != nil && s.Live != nil {
		o.Pause = func() { time.Sleep(collectPause) }
		res, err = s.RW.Collect(o)
	} else {
		res, err = rewind.Collect(s.J, o)
	}
	if err != nil {
		return nil, err
	}
	res.DiskFrom = before
	res.DiskTo = storeBytes(dir)
	if keep > 0 {
		res.Policy = fmt.Sprintf("--keep %d", keep)
	} else if p, _, err := rewind.LoadPolicy(s.J); err == nil {
		res.Policy = fmt.Sprintf("seqs %s, generations %s", p.Seqs, p.Generations)
	}
	return res, nil
}

// storeBytes is the store's size on disk: the index (Badger's directory)
// and the segment log beside it (dir.log), when there is one.
func storeBytes(dir string) int64 {
	a, _ := DiskUsage(dir)
	b, _ := DiskUsage(dir + ".log")
	return a + b
}

// Retention reports the policy and floors; with a window, a period or
// Default, it changes the policy first.
func (s *Service) Retention(seqs, gens, every string, reset bool) (*rewind.RetentionInfo, error) {
	if seqs == "" && gens == "" && every == "" && !reset {
		return rewind.Retention(s.J)
	}
	info, err := rewind.SetRetention(s.J, seqs, gens, every, reset)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	return info, nil
}

// collector runs the policy's collection every period until the daemon
// finishes. A failed collection is logged and tried again a period later.
func (d *Daemon) collector() {
	last := time.Now()
	for {
		p, _, err := rewind.LoadPolicy(d.j)
		if err != nil {
			d.log.Warn().Err(err).Msg("retention policy (using the default)")
		}
		wait := min(collectPoll, max(0, p.Every-time.Since(last)))
		t := time.NewTimer(wait)
		select {
		case <-d.done:
			t.Stop()
			return
		case <-t.C:
		}
		if time.Since(last) < p.Every {
			continue
		}
		last = time.Now()
		res, err := d.svc.collect(rewind.CollectOptions{IfMoved: true})
		if err != nil {
			select {
			case <-d.done:
				return
			default:
			}
			d.log.Warn().Err(err).Msg("retention: collection failed")
			continue
		}
		if res.Objects > 0 || res.Records > 0 || res.DroppedGens > 0 {
			d.log.Info().Uint64("floor", res.Floor).Uint64("gen_floor", res.Floors.Gen).Int("records", res.Records).
				Int("generations", res.DroppedGens).Int("objects", res.Objects).Int64("bytes", res.ObjectBytes).
				Int("spared", res.Spared).Dur("took", time.Duration(res.TookNs)).Msg("retention: collected")
			d.mem.after("retention")
		}
	}
}
