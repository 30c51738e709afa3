package daemon

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/rewind"
)

// callOps answers the methods of the op log, undo and redo, and branches
// (ok false: method is none of them). The daemon (d set) stops runs around
// the rewinds they make, as for rewind; on an unmounted store (d nil) the
// store is rewound and the project directory written back, as an offline
// rewind does.
func callOps(s *Service, d *Daemon, method string, raw json.RawMessage) (api.Result, error, bool) {
	switch method {
	case api.OpLogParams{}.Method():
		if _, err := params[api.OpLogParams](raw); err != nil {
			return nil, err, true
		}
		l, err := rewind.Ops(s.J)
		return &api.OpLogResult{Log: l}, err, true
	case api.UndoParams{}.Method(), api.RedoParams{}.Method():
		p, err := params[api.UndoParams](raw) // RedoParams has the same fields
		if err != nil {
			return nil, err, true
		}
		r, err := result(s.undo(d, method == api.RedoParams{}.Method(), p.NoCancel))
		return r, err, true
	case api.BranchListParams{}.Method():
		if _, err := params[api.BranchListParams](raw); err != nil {
			return nil, err, true
		}
		bs, err := rewind.Branches(s.J)
		if bs == nil {
			bs = []rewind.Branch{}
		}
		return &api.BranchListResult{Branches: bs}, err, true
	case api.BranchNameParams{}.Method():
		p, err := params[api.BranchNameParams](raw)
		if err != nil {
			return nil, err, true
		}
		n, err := s.branchName(p)
		if err != nil {
			return nil, err, true
		}
		return &api.BranchNameResult{Name: n}, nil, true
	case api.CheckoutParams{}.Method():
		p, err := params[api.CheckoutParams](raw)
		if err != nil {
			return nil, err, true
		}
		r, err := result(s.checkout(d, p))
		return r, err, true
	}
	return nil, nil, false
}

// serialize holds off other undos, redos, checkouts and namings of a
// mounted workspace (an unmounted store is held by one process anyway).
func (s *Service) serialize() func() {
	if s.RW == nil {
		return func() {}
	}
	return s.RW.Serialize()
}

// undo undoes (or redoes) the operation the op log names.
func (s *Service) undo(d *Daemon, redo, noCancel bool) (*api.UndoResult, error) {
	defer s.serialize()()
	if d != nil {
		verb := "undo"
		if redo {
			verb = "redo"
		}
		release, err := d.hold(verb)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	l, err := rewind.Ops(s.J)
	if err != nil {
		return nil, err
	}
	m, err := l.Next(redo)
	if err != nil {
		return nil, err
	}
	r := &api.UndoResult{Move: m}
	if m.Path != "" {
		if s.RW == nil {
			return nil, fmt.Errorf("%w: %s of restore %d: restore works on a mounted workspace; mount it first", ErrUsage, m.Kind, m.Of)
		}
		r.Restore, err = s.RW.RestoreMove(m, s.Views)
		return r, err
	}
	rr, err := s.rewindAs(d, m.Target, noCancel, m.Label)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Kind, err)
	}
	r.Rewind, r.Cancelled, r.Frozen, r.Kept = rr.Rewind, rr.Cancelled, rr.Frozen, rr.Kept
	return r, nil
}

// rewindAs rewinds to seq with the reset record labelled label: through
// the daemon (runs stopped first) or on the unmounted store.
func (s *Service) rewindAs(d *Daemon, seq uint64, noCancel bool, label string) (*api.RewindResult, error) {
	if d != nil {
		return d.rewindAs(seq, noCancel, label)
	}
	res, err := rewindOffline(s.J, seq, label)
	return &api.RewindResult{Rewind: res}, err
}

// branchName gives p.Name to the state p.Target names ("": head).
func (s *Service) branchName(p api.BranchNameParams) (*rewind.Name, error) {
	defer s.serialize()()
	seq := s.J.Head()
	if p.Target != "" {
		var err error
		if seq, err = rewind.Resolve(s.J, p.Target); err != nil {
			return nil, err
		}
	}
	if err := rewind.SetName(s.J, p.Name, seq); err != nil {
		return nil, err
	}
	names, err := rewind.Names(s.J)
	if err != nil {
		return nil, err
	}
	for i := range names {
		if names[i].Name == p.Name {
			return &names[i], nil
		}
	}
	return nil, fmt.Errorf("name %s: not found after writing it", p.Name)
}

// checkout moves the workspace to a branch's tip, as an operation.
func (s *Service) checkout(d *Daemon, p api.CheckoutParams) (*api.RewindResult, error) {
	defer s.serialize()()
	if d != nil {
		release, err := d.hold("checkout")
		if err != nil {
			return nil, err
		}
		defer release()
	}
	seq, ok, err := rewind.ResolveBranch(s.J, p.Name)
	if err != nil {
		return nil, err
	}
	if !ok {
		// A label, gN or seq is a target, not a branch: say which command takes it.
		if _, rerr := rewind.Resolve(s.J, p.Name); rerr == nil {
			return nil, fmt.Errorf("%w: checkout: no branch %q; it names a point on the timeline; to go there: reynfs rewind %s", rewind.ErrTarget, p.Name, shellQuote(p.Name))
		}
		return nil, fmt.Errorf("%w: checkout: no branch %q (see 'reynfs branch')", rewind.ErrTarget, p.Name)
	}
	if _, err := rewind.Resolve(s.J, fmt.Sprint(seq)); err != nil { // retained?
		return nil, err
	}
	if p.Dry {
		if s.RW != nil {
			res, err := s.RW.Rewind(seq, true)
			return &api.RewindResult{Rewind: res}, err
		}
		res, err := rewind.RewindStore(s.J, seq, true)
		return &api.RewindResult{Rewind: res}, err
	}
	return s.rewindAs(d, seq, p.NoCancel, "checkout "+p.Name)
}

// shellQuote is name as a reader would type it in a command line.
func shellQuote(name string) string {
	if name != "" && strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/@~+") == "" {
		return name
	}
	return "'" + strings.ReplaceAll(name, "'", `'\''`) + "'"
}
