package daemon

import (
	"errors"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// AlreadyAt reports whether the workspace already is in the state at seq:
// seq is on the current path and every record after it on that path is a
// generation or a reset record, which change no file and no agent state.
// A rewind there is a no-op: it writes no record and cancels no run. The
// check is conservative: a write that put back the same bytes counts as a
// change, and so does an identical state on another branch (a real
// rewind with no changes then follows, as before).
//
// On a mounted workspace the buffered writes are journaled first, and the
// kernel's dirty mapped pages brought in before that (outside every lock,
// invariant 12), or a rewind meant to drop them would be skipped. The
// flush and the check hold the live tree's lock together: a write
// buffered between them would be in the tree but not in the journal the
// check reads, and the answer "already there" would be false when given.
func (s *Service) AlreadyAt(seq uint64) (bool, error) {
	if s.RW != nil && s.RW.Inv != nil {
		if err := s.RW.Inv.WriteBack(); err != nil {
			return false, err
		}
	}
	if s.Live == nil {
		return alreadyAt(s.J, seq)
	}
	s.Live.Lock()
	defer s.Live.Unlock()
	if err := s.Live.FlushAllLocked(tree.Caller{Comm: "reynfs-rewind"}); err != nil {
		return false, err
	}
	if err := s.J.Sync(); err != nil { // Iter reads committed records
		return false, err
	}
	return alreadyAt(s.J, seq)
}

// rewindNoOp answers a rewind to the state the workspace is already in
// (nil, nil: it is not).
func (s *Service) rewindNoOp(target string) (*api.RewindResult, error) {
	seq, err := rewind.Resolve(s.J, target)
	if err != nil {
		return nil, err
	}
	already, err := s.AlreadyAt(seq)
	if err != nil || !already {
		return nil, err
	}
	return &api.RewindResult{Rewind: &rewind.Result{Target: seq, Changes: []rewind.Change{}}, Already: true}, nil
}

func alreadyAt(j *journal.Journal, seq uint64) (bool, error) {
	head := j.Head()
	path, err := j.Path()
	if err != nil {
		return false, err
	}
	if seq > head || !path.OnPath(seq, head) {
		return false, nil
	}
	same := true
	err = j.Iter(seq+1, func(r *journal.Record) error {
		if !path.OnPath(r.Seq, head) || r.Op == journal.OpGeneration || r.Op == journal.OpReset {
			return nil
		}
		same = false
		return errDone
	})
	if err != nil && !errors.Is(err, errDone) {
		return false, err
	}
	return same, nil
}
