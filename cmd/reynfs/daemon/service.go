package daemon

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// Service answers the inspect and rewind commands against one store: the
// daemon serves it over the control socket, and the CLI runs it directly
// on a store no daemon holds.
type Service struct {
	J    *journal.Journal
	Live *tree.Live       // nil when not mounted
	RW   *rewind.Rewinder // nil when not mounted
	// Views is the name of the history views in the mount root ("" when
	// not mounted): restore refuses a path under it, texts name it.
	Views string
}

// The results' types are the control API's (agents/api).
type (
	LogEntry   = api.LogEntry
	RecordLine = api.RecordLine
	Branch     = api.Branch
	LogResult  = api.LogResult
	AgentState = api.AgentState
)

// Log lists the generations newest first; all includes those on inactive
// branches, wal the records after each generation up to the next one.
func (s *Service) Log(all, wal bool) (*LogResult, error) {
	return s.LogOf(api.LogParams{All: all, WAL: wal})
}

// LogOf is Log with the log method's other parameters: a path filter.
// A generation's counts are its net change against the previous
// generation on its path (the first against the import it starts from),
// as git counts a commit, not the records between them.
func (s *Service) LogOf(p api.LogParams) (*LogResult, error) {
	if p.WAL && s.Live != nil {
		// The head counts records appended and not yet committed, which
		// Iter does not see: commit them, or the listing would stop short
		// of the head it reports.
		if err := s.J.Sync(); err != nil {
			return nil, err
		}
	}
	all, wal := p.All, p.WAL
	filter, err := newPathFilter(p.Paths, p.Exclude)
	if err != nil {
		return nil, err
	}
	gens, err := rewind.Timeline(s.J)
	if err != nil {
		return nil, err
	}
	path, err := s.J.Path()
	if err != nil {
		return nil, err
	}
	head := s.J.Head()
	res := &LogResult{Head: head}
	for i, g := range gens {
		e := LogEntry{ID: g.ID, Seq: g.Rec.Seq, Kind: g.Rec.GenKind, Label: g.Rec.Label,
			Time: time.Unix(0, g.Rec.Time), Root: g.Rec.Root.String(), Active: path.OnPath(g.Rec.Seq, head),
			Pid: g.Rec.Pid, Comm: g.Rec.Comm, Run: g.Rec.Run, Agent: g.Rec.Agent}
		if !all && !e.Active {
			continue
		}
		base, found := cas.Hash{}, false
		var before []journal.AgentRef
		for k := i - 1; k >= 0; k-- { // previous generation on this one's path
			if path.OnPath(gens[k].Rec.Seq, g.Rec.Seq) {
				e.Parent, base, found = gens[k].Rec.Seq, gens[k].Rec.Root, true
				before = gens[k].Rec.Agents
				break
			}
		}
		if p.Agents {
			e.AgentStates = s.genAgents(g.Rec.Agents, before)
		}
		if !found {
			base, found, err = importRoot(s.J, path, g.Rec.Seq)
			if err != nil {
				return nil, err
			}
		}
		if found {
			cs, err := rewind.DiffRoots(s.J.Objects(), base, g.Rec.Root)
			if err != nil {
				return nil, err
			}
			e.Changed = rewind.Summarize(filter.changes(rewind.Coalesce(cs)))
		}
		touched := e.Changed != (rewind.Summary{})
		if wal {
			next := head
			if i+1 < len(gens) {
				next = gens[i+1].Rec.Seq - 1
			}
			if e.Records, err = s.records(path, g.Rec.Seq, next, head, all, filter); err != nil {
				return nil, err
			}
			touched = touched || len(e.Records) > 0
		}
		if filter.active() && !touched {
			continue
		}
		res.Gens = append(res.Gens, e)
	}
	for l, r := 0, len(res.Gens)-1; l < r; l, r = l+1, r-1 {
		res.Gens[l], res.Gens[r] = res.Gens[r], res.Gens[l]
	}
	if all {
		resets, err := s.J.Resets()
		if err != nil {
			return nil, err
		}
		floor, err := s.J.Floor()
		if err != nil {
			return nil, err
		}
		for _, r := range resets {
			if r.Seq-1 < floor {
				continue // the branch's records went with a gc
			}
			res.Branches = append(res.Branches, Branch{Reset: r.Seq, Target: r.ResetTo, From: r.ResetTo + 1, To: r.Seq - 1,
				Active: path.OnPath(r.Seq-1, head)})
		}
	}
	return res, nil
}

// records lists the records after generation gen up to seq to, each with
// the paths it touched; with a filter only those that touched a kept path.
func (s *Service) records(path *journal.Path, gen, to, head uint64, all bool, filter *pathFilter) ([]RecordLine, error) {
	var out []RecordLine
	var namer *pathNamer
	err := s.J.Iter(gen+1, func(r *journal.Record) error {
		if r.Seq > to {
			return errDone
		}
		if !all && !path.OnPath(r.Seq, head) {
			return nil
		}
		if namer == nil {
			var err error
			if namer, err = newPathNamer(s.J, gen); err != nil {
				return err
			}
		}
		line := RecordLine{Seq: r.Seq, Time: time.Unix(0, r.Time), Op: r.Op.String(), What: describe(r), Pid: r.Pid, Comm: r.Comm,
			Run: r.Run, Agent: r.Agent}
		if line.Paths = namer.name(path, r); line.Paths != nil {
			line.What = describePaths(r, line.Paths)
		}
		if filter.active() && !filter.any(line.Paths) {
			return nil
		}
		out = append(out, line)
		return nil
	})
	if errors.Is(err, errDone) {
		err = nil
	}
	return out, err
}

var errDone = errors.New("done")

// describe says what a record did, briefly.
func describe(r *journal.Record) string {
	switch r.Op {
	case journal.OpCreate, journal.OpMkdir, journal.OpLink:
		return fmt.Sprintf("%q in dir %d (inode %d)", r.Name, r.Parent, r.Ino)
	case journal.OpSymlink:
		return fmt.Sprintf("%q -> %q in dir %d (inode %d)", r.Name, r.Target, r.Parent, r.Ino)
	case journal.OpUnlink, journal.OpRmdir:
		return fmt.Sprintf("%q in dir %d", r.Name, r.Parent)
	case journal.OpRename:
		return fmt.Sprintf("%q in dir %d -> %q in dir %d", r.Name, r.Parent, r.NewName, r.NewParent)
	case journal.OpData:
		kind := [...]string{"write", "truncate", "fallocate", "copy"}[min(int(r.Kind), 3)]
		return fmt.Sprintf("%s inode %d: size %d, %d chunks", kind, r.Ino, r.Size, len(r.Chunks))
	case journal.OpSetattr:
		return fmt.Sprintf("inode %d mode %o uid %d gid %d", r.Ino, r.Mode, r.Uid, r.Gid)
	case journal.OpSetxattr, journal.OpRemovexattr:
		return fmt.Sprintf("inode %d %s", r.Ino, r.XName)
	case journal.OpGeneration:
		return fmt.Sprintf("%s %q root %s", r.GenKind, r.Label, r.Root.Short())
	case journal.OpReset:
		return fmt.Sprintf("to seq %d (supersedes %d)", r.ResetTo, r.Supersedes)
	case journal.OpImport:
		return fmt.Sprintf("%q root %s", r.Label, r.Root.Short())
	case journal.OpAgentState:
		return fmt.Sprintf("agent %q state %s", r.Label, r.Root.Short())
	case journal.OpRestore:
		return fmt.Sprintf("%q in dir %d: %s", r.Name, r.Parent, r.Label)
	}
	return ""
}

// state returns the root hash of a target (a seq, gN, -N, label or "live"/"")
// and a store that can read it.
func (s *Service) state(target string) (cas.Hash, cas.Store, uint64, error) {
	if (target == "" || target == "live") && s.Live != nil {
		s.Live.Lock()
		defer s.Live.Unlock()
		if err := s.Live.FlushAllLocked(tree.Caller{Comm: "reynfs"}); err != nil {
			return cas.Hash{}, nil, 0, err
		}
		if err := s.J.Sync(); err != nil { // the chunks just flushed, readable from the store
			return cas.Hash{}, nil, 0, err
		}
		root, blobs, err := s.Live.Tree().Root()
		if err != nil {
			return cas.Hash{}, nil, 0, err
		}
		if err := rewind.StoreBlobs(s.J.Objects(), blobs); err != nil {
			return cas.Hash{}, nil, 0, err
		}
		return root, s.J.Objects(), s.J.Head(), nil
	}
	if target == "" || target == "live" {
		target = fmt.Sprint(s.J.Head())
	}
	seq, err := rewind.Resolve(s.J, target)
	if err != nil {
		return cas.Hash{}, nil, 0, err
	}
	t, err := rewind.Reconstruct(s.J, seq)
	if err != nil {
		return cas.Hash{}, nil, 0, err
	}
	root, blobs, err := t.Root()
	if err != nil {
		return cas.Hash{}, nil, 0, err
	}
	return root, rewind.NewOverlay(s.J.Objects(), blobs), seq, nil
}

// Diff lists what changed from a to b (b empty: the live tree), and with
// patch a unified diff of the files.
func (s *Service) Diff(a, b string, patch bool) ([]rewind.Change, string, error) {
	return s.DiffOf(api.DiffParams{Target: a, Other: b, Patch: patch})
}

// DiffOf is Diff with the diff method's path filter.
func (s *Service) DiffOf(p api.DiffParams) ([]rewind.Change, string, error) {
	a, b, patch := p.Target, p.Other, p.Patch
	filter, err := newPathFilter(p.Paths, p.Exclude)
	if err != nil {
		return nil, "", err
	}
	ra, sa, _, err := s.state(a)
	if err != nil {
		return nil, "", err
	}
	rb, sb, _, err := s.state(b)
	if err != nil {
		return nil, "", err
	}
	ov := rewind.NewOverlay(sa)
	if o, ok := sb.(*rewind.Overlay); ok {
		ov = rewind.NewOverlay(sa, o.Blobs())
	}
	cs, err := rewind.DiffRoots(ov, ra, rb)
	cs = filter.changes(rewind.Coalesce(cs))
	if err != nil || !patch {
		return cs, "", err
	}
	var out strings.Builder
	err = rewind.Patch(ov, cs, &out)
	return cs, out.String(), err
}

// Export materializes a retained point as an ordinary directory.
func (s *Service) Export(target, dir string) (uint64, error) {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return 0, fmt.Errorf("%w: export into %s: directory is not empty", ErrUsage, dir)
	}
	if target == "" || target == "live" {
		target = fmt.Sprint(s.J.Head())
	}
	seq, err := rewind.Resolve(s.J, target)
	if err != nil {
		return 0, err
	}
	t, err := rewind.Reconstruct(s.J, seq)
	if err != nil {
		return 0, err
	}
	if _, _, err := t.Root(); err != nil {
		return 0, err
	}
	return seq, rewind.Export(t, nil, dir)
}

// Rewind moves the workspace (or the unmounted store) to target.
func (s *Service) Rewind(target string, dry bool) (*rewind.Result, error) {
	seq, err := rewind.Resolve(s.J, target)
	if err != nil {
		return nil, err
	}
	if s.RW != nil {
		return s.RW.Rewind(seq, dry)
	}
	if dry {
		return rewind.RewindStore(s.J, seq, true)
	}
	return rewindOffline(s.J, seq, "")
}

// Restore brings one path back from target into the live tree.
func (s *Service) Restore(rel, target string) (*rewind.RestoreResult, error) {
	seq, err := rewind.Resolve(s.J, target)
	if err != nil {
		return nil, err
	}
	if s.Live == nil {
		return nil, fmt.Errorf("%w: restore works on a mounted workspace; mount it first (or export the point and copy)", ErrUsage)
	}
	return s.RW.Restore(rel, seq, s.Views)
}

// Show describes one generation or record.
func (s *Service) Show(target string) (*RecordLine, *LogEntry, error) {
	seq, err := rewind.Resolve(s.J, target)
	if err != nil {
		return nil, nil, err
	}
	r, err := s.J.Get(seq)
	if err != nil {
		return nil, nil, err
	}
	line := &RecordLine{Seq: r.Seq, Time: time.Unix(0, r.Time), Op: r.Op.String(), What: describe(r), Pid: r.Pid, Comm: r.Comm}
	if r.Op != journal.OpGeneration {
		return line, nil, nil
	}
	lr, err := s.Log(true, false)
	if err != nil {
		return nil, nil, err
	}
	for i := range lr.Gens {
		if lr.Gens[i].Seq == seq {
			return line, &lr.Gens[i], nil
		}
	}
	return line, nil, nil
}

// AgentSave publishes an agent's runtime state as one record.
func (s *Service) AgentSave(name string, state []byte) (uint64, error) {
	return s.AgentSaveFrom(agents.Origin{}, name, state)
}

// AgentSaveFrom is AgentSave on behalf of o (the process behind the
// control request, and its run).
func (s *Service) AgentSaveFrom(o agents.Origin, name string, state []byte) (uint64, error) {
	if s.RW != nil && s.RW.Agents != nil {
		seq, _, err := s.RW.Agents.SaveFrom(s.J, s.Live, o, name, state)
		return seq, err
	}
	seq, _, err := agents.NewRegistry(nil).Save(s.J, nil, name, state)
	return seq, err
}

// AgentStates lists every agent's state at target ("" : now), by name.
func (s *Service) AgentStates(target string) ([]AgentState, uint64, error) {
	var states map[string]cas.Hash
	seq := s.J.Head()
	if target == "" && s.RW != nil && s.RW.Agents != nil {
		states = s.RW.Agents.States()
	} else {
		if target != "" {
			var err error
			if seq, err = rewind.Resolve(s.J, target); err != nil {
				return nil, 0, err
			}
		}
		var err error
		if states, err = rewind.AgentStates(s.J, seq); err != nil {
			return nil, 0, err
		}
	}
	var out []AgentState
	for _, r := range agents.Refs(states) {
		out = append(out, AgentState{Name: r.Name, State: r.State})
	}
	return out, seq, nil
}

// AgentShow returns one agent's state at target ("" : now).
func (s *Service) AgentShow(name, target string) ([]byte, error) {
	if err := agents.CheckName(name); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	list, seq, err := s.AgentStates(target)
	if err != nil {
		return nil, err
	}
	for _, a := range list {
		if a.Name == name {
			return s.J.Objects().Get(a.State)
		}
	}
	return nil, fmt.Errorf("%w: agent %s has no saved state at seq %d", ErrUsage, name, seq)
}

// StoreStatus describes an unmounted store.
func (s *Service) StoreStatus(store string) (*Status, error) {
	objs, bytes, err := s.J.Objects().Stats()
	if err != nil {
		return nil, err
	}
	size, err := DiskUsage(DBPath(store))
	if err != nil {
		return nil, err
	}
	dir, err := s.J.GetMeta(metaDir)
	if err != nil {
		return nil, err
	}
	views, err := s.J.GetMeta(metaViews)
	if err != nil {
		return nil, err
	}
	private, err := privateMeta(s.J)
	if err != nil {
		return nil, err
	}
	follow, err := storeFollowStatus(s.J)
	if err != nil {
		return nil, err
	}
	return &Status{Dir: string(dir), Store: store, HeadSeq: s.J.Head(), Records: s.J.Head(),
		Objects: objs, ObjectBytes: bytes, StoreBytes: size, ViewsName: cmp.Or(string(views), fs.ViewDir),
		PrivateHistory: private, Lazy: lazyStatusOf(s.J), Follow: follow}, nil
}
