package timeline

import (
	"context"
	"encoding/json"
	"fmt"
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
	// agents caches the agents' states per seq: a generation's states
	// never change, so the agent column costs one call per point once.
	agents map[uint64]map[string]string
}

// maxAgentLookups bounds the agent.list calls one load makes: the agent
// column of older points stays empty rather than the picker slow to open.
const maxAgentLookups = 64

func (a *API) Points(ctx context.Context, all bool) (uint64, []Point, error) {
	var r api.LogReply
	if err := a.C.Do(ctx, api.LogParams{All: all}, &r); err != nil {
		return 0, nil, fmt.Errorf("log: %w", err)
	}
	pts := make([]Point, 0, len(r.Log.Gens))
	for _, g := range r.Log.Gens {
		pts = append(pts, Point{ID: g.ID, Seq: g.Seq, Kind: g.Kind, Label: g.Label, Time: g.Time,
			Active: g.Active, Parent: g.Parent, Added: g.Changed.Added, Modified: g.Changed.Modified,
			Removed: g.Changed.Removed})
	}
	lookups := 0
	for i := range pts {
		if lookups >= maxAgentLookups {
			break
		}
		now, n1 := a.agentStates(ctx, pts[i].Seq)
		before := map[string]string{}
		n2 := 0
		if pts[i].Parent != 0 {
			before, n2 = a.agentStates(ctx, pts[i].Parent)
		}
		lookups += n1 + n2
		var names []string
		for name, h := range now {
			if before[name] != h {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for k, name := range names {
			if sess := a.session(ctx, name, pts[i].Seq); sess != "" {
				names[k] += "/" + sess
			}
			lookups++
		}
		pts[i].Agent = strings.Join(names, ",")
	}
	return r.Log.Head, pts, nil
}

// agentStates returns the agents' state hashes at seq and the number of
// calls it made (0 when cached). Best effort: an error is no agents.
func (a *API) agentStates(ctx context.Context, seq uint64) (map[string]string, int) {
	if m, ok := a.agents[seq]; ok {
		return m, 0
	}
	if a.agents == nil {
		a.agents = map[uint64]map[string]string{}
	}
	var r api.AgentListResult
	m := map[string]string{}
	if err := a.C.Do(ctx, api.AgentListParams{At: seqTarget(seq)}, &r); err == nil {
		for _, s := range r.Agents {
			m[s.Name] = s.State.String()
		}
		a.agents[seq] = m
	}
	return m, 1
}

// session is the short id of the conversation an agent hook saved as the
// agent's state at seq ("" when the state is not a hook's).
func (a *API) session(ctx context.Context, name string, seq uint64) string {
	var r api.AgentShowResult
	if a.C.Do(ctx, api.AgentShowParams{Name: name, At: seqTarget(seq)}, &r) != nil {
		return ""
	}
	var st hooks.State
	if json.Unmarshal(r.Data, &st) != nil {
		return ""
	}
	if len(st.SessionID) > 8 {
		return st.SessionID[:8]
	}
	return st.SessionID
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
	a.agents = nil
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
