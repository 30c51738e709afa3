package timeline

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/agents/hooks"
)

// Source is everything the picker needs from a workspace. The model sees
// only this, so its Update and View are tested with a fake; the real one
// (API) speaks the daemon's control API and never opens the store.
type Source interface {
	// Points lists the generations, newest first: only those on the
	// current path, or with all also those of abandoned branches.
	Points(ctx context.Context, all bool) (head uint64, pts []Point, err error)
	// Changes is what a rewind to seq would change in the workspace now.
	Changes(ctx context.Context, seq uint64) ([]Change, error)
	// FileDiff is the unified diff a rewind to seq would make to path.
	FileDiff(ctx context.Context, seq uint64, path string) (string, error)
	// Runs lists the runs still going, which a rewind would stop.
	Runs(ctx context.Context) ([]api.RunInfo, error)
	// Resume names how to bring back each agent's conversation at seq.
	Resume(ctx context.Context, seq uint64) []string
	// Rewind moves the whole workspace to seq; Restore brings back one
	// path only; Undo reverts the last operation (rewind, checkout or
	// restore) through the daemon's undo. Each returns what to tell
	// the user.
	Rewind(ctx context.Context, seq uint64) (string, error)
	Restore(ctx context.Context, path string, seq uint64) (string, error)
	Undo(ctx context.Context) (string, error)
}

// Point is one generation as the picker shows it.
type Point struct {
	ID     int
	Seq    uint64
	Kind   string
	Label  string
	Time   time.Time
	Active bool   // on the path of the current state
	Parent uint64 // seq of the previous generation on its own path (0: none)
	// Added, Modified, Removed count the change against Parent.
	Added, Modified, Removed int
	// Agent names the agents whose saved state changed at this point,
	// each with the short id of its session when a hook saved it
	// ("claude/1a2b3c4d").
	Agent string
	// Branches are the names of the abandoned branches whose newest
	// generation this point is (b-TIP, or names given with 'reynfs
	// branch'): what 'reynfs checkout' takes.
	Branches []string
}

// Change is one path a rewind would change: Kind is added (the rewind
// brings it back), modified or removed.
type Change struct {
	Path string
	Kind string
	Dir  bool
}

// Caller makes one control API call; *api.Client is one.
type Caller interface {
	Do(ctx context.Context, p api.Params, res any) error
}

// API is the Source over a daemon's control API.
type API struct {
	C Caller
}

// Points makes at most two calls whatever the number of points: the log
// with each generation's agent states (its agent column), and with all
// the branch list (the names of abandoned rows).
func (a *API) Points(ctx context.Context, all bool) (uint64, []Point, error) {
	var r api.LogReply
	if err := a.C.Do(ctx, api.LogParams{All: all, Agents: true}, &r); err != nil {
		return 0, nil, fmt.Errorf("log: %w", err)
	}
	pts := make([]Point, 0, len(r.Log.Gens))
	for _, g := range r.Log.Gens {
		pts = append(pts, Point{ID: g.ID, Seq: g.Seq, Kind: g.Kind, Label: g.Label, Time: g.Time,
			Active: g.Active, Parent: g.Parent, Added: g.Changed.Added, Modified: g.Changed.Modified,
			Removed: g.Changed.Removed, Agent: agentColumn(g.AgentStates)})
	}
	if all {
		a.branchNames(ctx, pts)
	}
	return r.Log.Head, pts, nil
}

// agentColumn names the agents whose saved state changed at a point, each
// with the short id of its session when a hook saved it ("claude/1a2b3c4d").
func agentColumn(states []api.GenAgentState) string {
	var names []string
	for _, st := range states {
		if !st.Changed {
			continue
		}
		name := st.Name
		if sess := st.Session; sess != "" {
			if len(sess) > 8 {
				sess = sess[:8]
			}
			name += "/" + sess
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// branchNames gives each abandoned point that is a branch's newest
// generation the branch's names: b-TIP (or its given name) and the names
// given to its tip, as 'reynfs branch' lists them and checkout takes them.
// Best effort: without the branch list the rows just have no names.
func (a *API) branchNames(ctx context.Context, pts []Point) {
	var r api.BranchListResult
	if a.C.Do(ctx, api.BranchListParams{}, &r) != nil {
		return
	}
	byGen := make(map[int]*Point, len(pts))
	for i := range pts {
		if !pts[i].Active {
			byGen[pts[i].ID] = &pts[i]
		}
	}
	for _, b := range r.Branches {
		p, ok := byGen[b.Gen]
		if !ok || b.Gen == 0 || b.Current {
			continue // no abandoned generation of its own
		}
		if !slices.Contains(p.Branches, b.Name) {
			p.Branches = append(p.Branches, b.Name)
		}
		for _, n := range b.Names {
			if !slices.Contains(p.Branches, n) {
				p.Branches = append(p.Branches, n)
			}
		}
	}
}

func (a *API) Changes(ctx context.Context, seq uint64) ([]Change, error) {
	var r api.DiffResult
	// From the live tree to seq: what a rewind there would do.
	if err := a.C.Do(ctx, api.DiffParams{Target: "live", Other: seqTarget(seq)}, &r); err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	out := make([]Change, 0, len(r.Changes))
	for _, c := range r.Changes {
		// A directory that is only modified changed because of what is
		// in it, which the list shows: as in git, it is not a line.
		if c.Dir && c.Kind == "modified" {
			continue
		}
		out = append(out, Change{Path: c.Path, Kind: c.Kind, Dir: c.Dir})
	}
	return out, nil
}

func (a *API) FileDiff(ctx context.Context, seq uint64, path string) (string, error) {
	var r api.DiffResult
	if err := a.C.Do(ctx, api.DiffParams{Target: "live", Other: seqTarget(seq), Patch: true}, &r); err != nil {
		return "", fmt.Errorf("diff: %w", err)
	}
	return filePatch(r.Patch, path), nil
}

// filePatch picks the section of a multi-file unified diff that is about
// path ("--- a/PATH" or "+++ b/PATH", or a "Binary files" line naming it).
func filePatch(patch, path string) string {
	var out strings.Builder
	in := false
	lines := strings.SplitAfter(patch, "\n")
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "Binary files "):
			in = false
			if strings.Contains(l, "a/"+path+" ") || strings.HasSuffix(strings.TrimSpace(l), "b/"+path+" differ") {
				out.WriteString(l)
			}
			continue
		case strings.HasPrefix(l, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ "):
			in = strings.TrimSpace(l) == "--- a/"+path || strings.TrimSpace(lines[i+1]) == "+++ b/"+path
		}
		if in {
			out.WriteString(l)
		}
	}
	return out.String()
}

func (a *API) Runs(ctx context.Context) ([]api.RunInfo, error) {
	var r api.RunsResult
	if err := a.C.Do(ctx, api.RunsParams{}, &r); err != nil {
		return nil, fmt.Errorf("runs: %w", err)
	}
	var out []api.RunInfo
	for _, run := range r.Runs {
		if run.State == "running" || run.State == "frozen" {
			out = append(out, run)
		}
	}
	return out, nil
}

// Resume is what 'reynfs rewind' prints after a rewind, read before it.
func (a *API) Resume(ctx context.Context, seq uint64) []string {
	var out []string
	for _, tool := range hooks.Tools {
		var st api.AgentShowResult
		if a.C.Do(ctx, api.AgentShowParams{Name: tool, At: seqTarget(seq)}, &st) != nil {
			continue
		}
		if line := hooks.Resume(st.Data); line != "" {
			out = append(out, fmt.Sprintf("agent %s: resume its conversation with: %s", tool, line))
		}
	}
	return out
}

func (a *API) Rewind(ctx context.Context, seq uint64) (string, error) {
	var r api.RewindResult
	if err := a.C.Do(ctx, api.RewindParams{Target: seqTarget(seq)}, &r); err != nil {
		return "", fmt.Errorf("rewind: %w", err)
	}
	return rewound(&r), nil
}

func rewound(r *api.RewindResult) string {
	s := r.Rewind.Summary
	msg := fmt.Sprintf("rewound to seq %d: %d added back, %d changed, %d removed", r.Rewind.Target, s.Added, s.Modified, s.Removed)
	if r.Rewind.Reset != 0 {
		msg += fmt.Sprintf(" (reset record at seq %d; u undoes it)", r.Rewind.Reset)
	}
	for _, run := range r.Cancelled {
		msg += fmt.Sprintf("; cancelled run %s", run.ID)
	}
	for _, run := range r.Frozen {
		msg += fmt.Sprintf("; froze and thawed run %s", run.ID)
	}
	return msg
}

func (a *API) Restore(ctx context.Context, path string, seq uint64) (string, error) {
	var r api.RestoreResult
	if err := a.C.Do(ctx, api.RestoreParams{Path: path, Target: seqTarget(seq)}, &r); err != nil {
		return "", fmt.Errorf("restore: %w", err)
	}
	return fmt.Sprintf("restored %s from seq %d (%d inodes, record at seq %d)", r.Restore.Path, r.Restore.From, r.Restore.Inodes, r.Restore.Seq), nil
}

// Undo asks the daemon to revert the last operation (a rewind, checkout
// or restore; issue 10's undo): append-only, and a second u undoes the
// undo, as 'reynfs undo' twice does.
func (a *API) Undo(ctx context.Context) (string, error) {
	var r api.UndoResult
	if err := a.C.Do(ctx, api.UndoParams{}, &r); err != nil {
		return "", fmt.Errorf("undo: %w", err)
	}
	m := r.Move
	if m == nil {
		return "undone", nil
	}
	if r.Restore != nil {
		return fmt.Sprintf("undid %s %d: restored %s from seq %d", m.OfKind, m.Of, r.Restore.Path, r.Restore.From), nil
	}
	return fmt.Sprintf("undid %s %d: the workspace is at seq %d again", m.OfKind, m.Of, m.Target), nil
}

func seqTarget(seq uint64) string { return strconv.FormatUint(seq, 10) }
