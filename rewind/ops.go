package rewind

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/reynfs/reynfs/journal"
)

// Operations, undo and redo.
//
// A workspace-level operation is a move of the workspace that a person
// asked for: a rewind, a checkout of a branch, a restore of one path, and
// an undo or redo of one of those. Each is exactly one journal record, a
// reset record (OpReset) or a restore record (OpRestore), and its id is
// that record's seq. What kind of operation a record is lives in its
// Label, so the op log is derived from the journal alone: it survives a
// remount, reads an unmounted store, and needs no other bookkeeping.
//
//	record      Label                          operation
//	OpReset     "" or "rewind"                 rewind (also every reset older than this code)
//	OpReset     "checkout NAME"                checkout of branch NAME
//	OpReset     "undo ID"                      undo of operation ID
//	OpReset     "redo ID"                      redo of operation ID
//	OpRestore   "restore PATH from seq N"      restore
//	OpRestore   "undo ID: restore PATH ..."    undo of operation ID (a restore)
//	OpRestore   "redo ID: restore PATH ..."    redo of operation ID (a restore)
//
// The op log is linear and global, in seq order, like jj's: it does not
// depend on which path is live, and an operation on a since abandoned
// branch is still one that happened. Undo and redo follow jj's newer
// `undo`/`redo` (and lazygit's z / ctrl+z) rather than a toggle: replaying
// the log in order keeps two stacks of the rewinds, checkouts and restores
// (the user operations),
//
//   - a user operation is pushed on the done stack and empties the redo
//     stack (as a new commit ends redo in an editor);
//   - undo pops the top of the done stack and pushes it on the redo stack;
//   - redo pops the top of the redo stack and pushes it back on done.
//
// So repeated undo walks back through the operations, newest first; undo
// of an undo is not a redo (it undoes the next older operation); redo
// goes forward again one operation at a time; and with nothing left to
// undo (or redo) the command refuses and writes nothing. Undo and redo
// never delete anything: each appends one record of its own, so it is
// itself in the op log and its effect can be seen and rewound like any
// other.
//
// The effect. Let Y be the record that last applied the operation (the
// operation itself, or its latest redo) and U the record that last undid
// it. Undo moves back to the state just before Y: for a rewind or
// checkout, a rewind to seq Y-1 (the abandoned future comes back); for a
// restore of PATH, a restore of PATH from seq Y-1 (the path as it was
// before). Redo moves to the state just before U the same way: a rewind
// to U-1, or a restore of PATH from U-1. File changes made between an
// operation and its undo go with the undo (they stay reachable as a
// branch, and redo brings them back), as in jj, where the working copy
// is part of what an operation restores. Plain file changes are not
// operations and do not empty the redo stack.
//
// A restore that created its path (nothing was there before) cannot be
// undone by a restore; undo refuses it and says to rewind to Y-1 instead.

// Operation kinds.
const (
	OpRewind   = "rewind"
	OpCheckout = "checkout"
	OpRestore  = "restore"
	OpUndo     = "undo"
	OpRedo     = "redo"
)

// ErrNothing: undo with nothing to undo, or redo with nothing to redo.
var ErrNothing = errors.New("nothing to do")

// Operation is one entry of the op log.
type Operation struct {
	ID   uint64    `json:"id"` // the seq of its record
	Time time.Time `json:"time"`
	Kind string    `json:"kind"` // rewind, checkout, restore, undo, redo
	// From is the state the workspace was in before (the seq just before
	// the record); To the state it moved to: a reset's target, or for a
	// restore the seq PATH was copied from.
	From uint64 `json:"from_seq"`
	To   uint64 `json:"to_seq"`
	// ToGen and ToLabel name To when it is a generation.
	ToGen   int    `json:"to_gen,omitempty"`
	ToLabel string `json:"to_label,omitempty"`
	Path    string `json:"path,omitempty"`   // a restore's path
	Branch  string `json:"branch,omitempty"` // a checkout's branch
	// Of is the operation an undo or redo undid or redid.
	Of uint64 `json:"of,omitempty"`
	// Undone: the operation is undone now (on the redo stack).
	Undone bool `json:"undone,omitempty"`
}

// OpLog is the op log and where undo and redo would go.
type OpLog struct {
	Ops []Operation `json:"ops"` // oldest first
	// Undo and Redo are the operations undo and redo would act on (0:
	// none).
	Undo uint64 `json:"undo,omitempty"`
	Redo uint64 `json:"redo,omitempty"`

	done, undone []stacked
	byID         map[uint64]*Operation
}

// stacked is a user operation on a stack and the record that last
// applied it (done) or undid it (undone).
type stacked struct {
	op   uint64
	last uint64
}

// OpOfRecord is the operation a record is (ok false: none), as the op log
// lists it but without ToGen, ToLabel and Undone (which need the rest of
// the journal): for readers of single records, such as the event stream.
func OpOfRecord(r *journal.Record) (Operation, bool) { return parseOp(r) }

// parseOp reads the operation a record is (ok false: none).
func parseOp(r *journal.Record) (Operation, bool) {
	op := Operation{ID: r.Seq, Time: time.Unix(0, r.Time), From: r.Seq - 1}
	switch r.Op {
	case journal.OpReset:
		op.To = r.ResetTo
		verb, arg, _ := strings.Cut(r.Label, " ")
		switch verb {
		case "", OpRewind:
			op.Kind = OpRewind
		case OpCheckout:
			op.Kind, op.Branch = OpCheckout, arg
		case OpUndo, OpRedo:
			id, err := strconv.ParseUint(arg, 10, 64)
			if err != nil {
				return op, false
			}
			op.Kind, op.Of = verb, id
		default:
			op.Kind = OpRewind
		}
		return op, true
	case journal.OpRestore:
		label := r.Label
		if verb, rest, ok := strings.Cut(label, " "); ok && (verb == OpUndo || verb == OpRedo) {
			idText, tail, ok := strings.Cut(rest, ": ")
			id, err := strconv.ParseUint(idText, 10, 64)
			if !ok || err != nil {
				return op, false
			}
			op.Kind, op.Of, label = verb, id, tail
		} else {
			op.Kind = OpRestore
		}
		p, from, ok := parseRestoreLabel(label)
		if !ok {
			return op, false
		}
		op.Path, op.To = p, from
		return op, true
	}
	return op, false
}

// restoreLabel is what a restore record says of itself.
func restoreLabel(p string, from uint64) string {
	return fmt.Sprintf("restore %s from seq %d", p, from)
}

func parseRestoreLabel(l string) (string, uint64, bool) {
	rest, ok := strings.CutPrefix(l, "restore ")
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndex(rest, " from seq ")
	if i < 0 {
		return "", 0, false
	}
	from, err := strconv.ParseUint(rest[i+len(" from seq "):], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return rest[:i], from, true
}

// Ops reads the op log from the journal: the reset records (the
// journal's index) and the restore records (opsindex.go).
func Ops(j *journal.Journal) (*OpLog, error) {
	floor, err := j.Floor()
	if err != nil {
		return nil, err
	}
	resets, err := j.Resets()
	if err != nil {
		return nil, fmt.Errorf("op log: %w", err)
	}
	restores, _, err := restoreSeqs(j, floor)
	if err != nil {
		return nil, fmt.Errorf("op log: %w", err)
	}
	var ops []Operation
	for _, r := range resets {
		if r.Seq < floor {
			continue
		}
		if op, ok := parseOp(r); ok {
			ops = append(ops, op)
		}
	}
	for _, s := range restores {
		r, err := j.Get(s)
		if err != nil {
			return nil, fmt.Errorf("op log: restore at seq %d: %w", s, err)
		}
		if op, ok := parseOp(r); ok {
			ops = append(ops, op)
		}
	}
	slices.SortFunc(ops, func(a, b Operation) int { return cmp.Compare(a.ID, b.ID) })
	gens, err := Timeline(j)
	if err != nil {
		return nil, err
	}
	bySeq := map[uint64]Gen{}
	for _, g := range gens {
		bySeq[g.Rec.Seq] = g
	}
	l := BuildOpLog(ops)
	for i := range l.Ops {
		if g, ok := bySeq[l.Ops[i].To]; ok {
			l.Ops[i].ToGen, l.Ops[i].ToLabel = g.ID, g.Rec.Label
		}
	}
	return l, nil
}

// BuildOpLog replays operations (oldest first) through the two stacks.
// An undo or redo that does not match the stack it should (a record
// written by hand, or one whose operation went with a gc) is listed but
// changes nothing.
func BuildOpLog(ops []Operation) *OpLog {
	l := &OpLog{Ops: ops, byID: map[uint64]*Operation{}}
	for i := range l.Ops {
		op := &l.Ops[i]
		l.byID[op.ID] = op
		switch op.Kind {
		case OpUndo:
			if n := len(l.done); n > 0 && l.done[n-1].op == op.Of {
				l.done = l.done[:n-1]
				l.undone = append(l.undone, stacked{op.Of, op.ID})
			}
		case OpRedo:
			if n := len(l.undone); n > 0 && l.undone[n-1].op == op.Of {
				l.undone = l.undone[:n-1]
				l.done = append(l.done, stacked{op.Of, op.ID})
			}
		default:
			l.done = append(l.done, stacked{op.ID, op.ID})
			l.undone = nil
		}
	}
	for _, s := range l.undone {
		l.byID[s.op].Undone = true
	}
	if n := len(l.done); n > 0 {
		l.Undo = l.done[n-1].op
	}
	if n := len(l.undone); n > 0 {
		l.Redo = l.undone[n-1].op
	}
	return l
}

// Move is what an undo or redo does: a rewind to Target (Path empty), or
// a restore of Path from Target; Label is the record's label.
type Move struct {
	Kind   string `json:"kind"` // undo or redo
	Of     uint64 `json:"of"`   // the operation undone or redone
	OfKind string `json:"of_kind"`
	Target uint64 `json:"target_seq"`
	Path   string `json:"path,omitempty"`
	Label  string `json:"-"`
}

// Next says what undo (redo false) or redo would do now.
func (l *OpLog) Next(redo bool) (*Move, error) {
	stack, kind := l.done, OpUndo
	if redo {
		stack, kind = l.undone, OpRedo
	}
	if len(stack) == 0 {
		return nil, fmt.Errorf("%w: no operation to %s (see 'reynfs op log')", ErrNothing, kind)
	}
	top := stack[len(stack)-1]
	op := l.byID[top.op]
	m := &Move{Kind: kind, Of: op.ID, OfKind: op.Kind, Target: top.last - 1}
	if op.Kind == OpRestore {
		m.Path = op.Path
		m.Label = fmt.Sprintf("%s %d: %s", kind, op.ID, restoreLabel(op.Path, m.Target))
	} else {
		m.Label = fmt.Sprintf("%s %d", kind, op.ID)
	}
	return m, nil
}
