package rewind

import (
	"errors"
	"fmt"
)

// Undo undoes (redo false) or redoes the operation the op log names (see
// ops.go), as one record: a rewind or a restore. views is as for Restore.
// The daemon runs the same steps with its runs cancelled around the
// rewind; this is the whole of it for a workspace with no runs.
func (rw *Rewinder) Undo(redo bool, views string) (*Move, *Result, *RestoreResult, error) {
	defer rw.Serialize()()
	l, err := Ops(rw.J)
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := l.Next(redo)
	if err != nil {
		return nil, nil, nil, err
	}
	if m.Path == "" {
		res, err := rw.RewindAs(m.Target, false, m.Label)
		return m, res, nil, err
	}
	rr, err := rw.RestoreMove(m, views)
	return m, nil, rr, err
}

// RestoreMove carries out an undo or redo of a restore.
func (rw *Rewinder) RestoreMove(m *Move, views string) (*RestoreResult, error) {
	rr, err := rw.RestoreAs(m.Path, m.Target, views, fmt.Sprintf("%s %d", m.Kind, m.Of))
	if err != nil && errors.Is(err, ErrTarget) {
		return nil, fmt.Errorf("%s of restore %d: %w (to go back past it, rewind to seq %d)", m.Kind, m.Of, err, m.Target)
	}
	return rr, err
}
