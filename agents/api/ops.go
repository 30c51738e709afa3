package api

import "github.com/reynfs/reynfs/rewind"

// The workspace-level operations (rewind, checkout, restore, undo, redo),
// undo and redo, and branches. The semantics are rewind/ops.go's and
// rewind/branches.go's; docs/api.md has an exchange for each.

// OpLogParams lists the operations, oldest first (jj's op log).
type OpLogParams struct{}

func (OpLogParams) Method() string { return "op.log" }
func (OpLogParams) readOnly() bool { return true }

// OpLogResult is the op log, and what undo and redo would act on.
type OpLogResult struct {
	Reply
	Log *rewind.OpLog `json:"log"`
}

// UndoParams reverts the newest operation not undone yet.
type UndoParams struct {
	// NoCancel refuses (runs_active) rather than cancel runs, as for rewind.
	NoCancel bool `json:"no_cancel,omitempty"`
}

func (UndoParams) Method() string { return "undo" }

// RedoParams moves forward again over the newest undone operation.
type RedoParams struct {
	NoCancel bool `json:"no_cancel,omitempty"`
}

func (RedoParams) Method() string { return "redo" }

// UndoResult says what an undo or redo did: Move, and the rewind or the
// restore that carried it out (one of the two), with the runs the rewind
// stopped as in RewindResult.
type UndoResult struct {
	Reply
	Move      *rewind.Move          `json:"move"`
	Rewind    *rewind.Result        `json:"rewind,omitempty"`
	Restore   *rewind.RestoreResult `json:"restore,omitempty"`
	Cancelled []RunInfo             `json:"cancelled,omitempty"`
	Frozen    []RunInfo             `json:"frozen,omitempty"`
	Kept      []RunInfo             `json:"kept,omitempty"`
}

// BranchListParams lists the abandoned branches and the given names.
type BranchListParams struct{}

func (BranchListParams) Method() string { return "branch.list" }
func (BranchListParams) readOnly() bool { return true }

// BranchListResult lists branches, newest tip first, then names on no
// abandoned tip.
type BranchListResult struct {
	Reply
	Branches []rewind.Branch `json:"branches"`
}

// BranchNameParams gives Name to a state: Target as for rewind (a branch
// b-TIP, a seq, gN, -N, a label; "" the current state).
type BranchNameParams struct {
	Name   string `json:"name"`
	Target string `json:"target,omitempty"`
}

func (BranchNameParams) Method() string { return "branch.name" }

// BranchNameResult is the name as stored.
type BranchNameResult struct {
	Reply
	Name *rewind.Name `json:"name"`
}

// CheckoutParams moves the workspace to a branch's tip: a rewind whose
// reset record says "checkout NAME", so it is an operation of its own.
type CheckoutParams struct {
	Name     string `json:"name"`
	Dry      bool   `json:"dry,omitempty"`
	NoCancel bool   `json:"no_cancel,omitempty"`
}

func (CheckoutParams) Method() string   { return "checkout" }
func (p CheckoutParams) readOnly() bool { return p.Dry }
