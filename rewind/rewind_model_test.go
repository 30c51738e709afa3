package rewind

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// The model-based rewind test: random file operations, checkpoints,
// rewinds (to any state ever seen, on the live branch or an abandoned one,
// and undoing a rewind) and reopen-from-disk, compared after every step
// with a model that keeps a full copy of every state by seq.

// state is a whole tree as the model sees it: path → "d", "f:<content>"
// or "l:<target>".
type state map[string]string

// snapshotTree walks t from the root.
func snapshotTree(t *testing.T, tr *tree.Tree) state {
	t.Helper()
	s := state{}
	var walk func(dir uint64, prefix string)
	walk = func(dir uint64, prefix string) {
		ents, err := tr.Readdir(dir)
		if err != nil {
			t.Fatalf("readdir %q: %v", prefix, err)
		}
		for _, e := range ents {
			p := path.Join(prefix, e.Name)
			n := tr.Node(e.Ino)
			switch {
			case n.IsDir():
				s[p] = "d"
				walk(e.Ino, p)
			case n.IsReg():
				buf := make([]byte, n.Size)
				if _, err := tr.ReadAt(n, buf, 0); err != nil {
					t.Fatalf("read %q: %v", p, err)
				}
				s[p] = "f:" + string(buf)
			default:
				target, err := n.Readlink()
				if err != nil {
					t.Fatalf("readlink %q: %v", p, err)
				}
				s[p] = "l:" + target
			}
		}
	}
	walk(tree.RootIno, "")
	return s
}

func diffStates(want, got state) string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[p]; !ok {
			out = append(out, fmt.Sprintf("missing %s (%.30q)", p, want[p]))
		} else if g != want[p] {
			out = append(out, fmt.Sprintf("%s is %.30q, want %.30q", p, g, want[p]))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			out = append(out, fmt.Sprintf("extra %s (%.30q)", p, got[p]))
		}
	}
	return strings.Join(out, "; ")
}

// workspace is a live tree over a journal, as the daemon runs it.
type workspace struct {
	dir  string
	j    *journal.Journal
	live *tree.Live
	rw   *Rewinder
}

var modelCaller = tree.Caller{Pid: 7, Comm: "model"}

func (w *workspace) open(t *testing.T) {
	t.Helper()
	w.j = openJournal(t, w.dir)
	if w.j.Head() == 0 {
		empty := tree.New(w.j.Objects(), 0o755, 0, 0, 1)
		root, blobs, err := empty.Root()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := CommitImport(w.j, root, blobs, tree.RootIno+1, "import"); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := Reconstruct(w.j, w.j.Head())
	if err != nil {
		t.Fatalf("reconstruct head %d: %v", w.j.Head(), err)
	}
	// The daemon keeps the inode ceiling in meta; a high start is enough here.
	next := max(tr.MaxIno()+1, 1<<20+w.j.Head())
	w.live = tree.NewLive(tr, w.j, next, next-1+1<<20, func(uint64) error { return nil })
	gens, err := Generations(w.j)
	if err != nil {
		t.Fatal(err)
	}
	states, err := agents.StatesAt(w.j, w.j.Head(), gens)
	if err != nil {
		t.Fatal(err)
	}
	w.rw = &Rewinder{J: w.j, Live: w.live, Agents: agents.NewRegistry(states)}
}

// withAgents adds the agents' states to a tree state, as "agent:NAME".
func withAgents(t *testing.T, j *journal.Journal, s state, states map[string]cas.Hash) state {
	t.Helper()
	out := maps.Clone(s)
	for name, h := range states {
		b, err := j.Objects().Get(h)
		if err != nil {
			t.Fatalf("agent %s state %s: %v", name, h.Short(), err)
		}
		out["agent:"+name] = "s:" + string(b)
	}
	return out
}

// stateAt is the tree and agent states at seq x, reconstructed.
func stateAt(t *testing.T, w *workspace, x uint64) (state, error) {
	t.Helper()
	tr, err := Reconstruct(w.j, x)
	if err != nil {
		return nil, err
	}
	gens, err := Generations(w.j)
	if err != nil {
		return nil, err
	}
	st, err := agents.StatesAt(w.j, x, gens)
	if err != nil {
		return nil, err
	}
	return withAgents(t, w.j, snapshotTree(t, tr), st), nil
}

func (w *workspace) close(t *testing.T) {
	t.Helper()
	if err := w.live.Sync(modelCaller); err != nil {
		t.Fatal(err)
	}
	if err := w.j.Close(); err != nil {
		t.Fatal(err)
	}
}

// lookupPath resolves p in the live tree.
func (w *workspace) lookupPath(p string) (tree.Stat, error) {
	st, err := w.live.GetAttr(tree.RootIno)
	for _, name := range strings.Split(p, "/") {
		if err != nil || name == "" {
			break
		}
		st, err = w.live.Lookup(st.Ino, name)
	}
	return st, err
}

var (
	modelDirs  = []string{"", "d", "d/e"}
	modelNames = []string{"a", "b", "d", "e"}
)

// step does one random file operation; it returns a description, and
// whether it changed the tree (errors are fine: the model only needs to
// know the result, which it reads back from the tree itself below, except
// that the model's own states are what rewinds must bring back).
func (w *workspace) step(rng *rand.Rand, i int) string {
	dir := modelDirs[rng.IntN(len(modelDirs))]
	name := modelNames[rng.IntN(len(modelNames))]
	p := path.Join(dir, name)
	parent, perr := w.lookupPath(dir)
	if dir == "" {
		parent, perr = w.live.GetAttr(tree.RootIno)
	}
	if perr != nil {
		return "skip: no " + dir
	}
	c := modelCaller
	switch k := rng.IntN(10); {
	case k < 3:
		st, err := w.lookupPath(p)
		if err != nil {
			st, err = w.live.Create(c, parent.Ino, name, syscall.S_IFREG|0o644, 0)
		}
		if err != nil || !st.IsReg() {
			return "write " + p + ": not a file"
		}
		data := []byte(fmt.Sprintf("<%d:%s>", i, strings.Repeat("x", rng.IntN(3)*40000)))
		off := uint64(0)
		if rng.IntN(2) == 0 {
			off = st.Size // append
		}
		if _, err := w.live.WriteAt(c, st.Ino, tree.NoHandle, data, off, false); err != nil {
			panic(err)
		}
		if err := w.live.Flush(c, st.Ino); err != nil {
			panic(err)
		}
		return fmt.Sprintf("write %s at %d", p, off)
	case k < 4:
		st, err := w.lookupPath(p)
		if err != nil || !st.IsReg() {
			return "truncate " + p + ": not a file"
		}
		_, err = w.live.SetAttr(c, st.Ino, tree.SetAttrIn{Valid: tree.SetSize, Size: st.Size / 2})
		return fmt.Sprintf("truncate %s: %v", p, err)
	case k < 5:
		_, err := w.live.Mkdir(c, parent.Ino, name, 0o755)
		return fmt.Sprintf("mkdir %s: %v", p, err)
	case k < 6:
		_, err := w.live.Symlink(c, parent.Ino, name, "../"+p)
		return fmt.Sprintf("symlink %s: %v", p, err)
	case k < 8:
		err := w.live.Unlink(c, parent.Ino, name)
		if errors.Is(err, tree.ErrIsDir) {
			err = w.live.Rmdir(c, parent.Ino, name)
		}
		return fmt.Sprintf("remove %s: %v", p, err)
	default:
		ndir := modelDirs[rng.IntN(len(modelDirs))]
		np, err := w.lookupPath(ndir)
		if ndir == "" {
			np, err = w.live.GetAttr(tree.RootIno)
		}
		if err != nil {
			return "skip: no " + ndir
		}
		nn := modelNames[rng.IntN(len(modelNames))]
		err = w.live.Rename(c, parent.Ino, name, np.Ino, nn, 0)
		return fmt.Sprintf("rename %s %s: %v", p, path.Join(ndir, nn), err)
	}
}

func TestRewindModel(t *testing.T) {
	seeds, steps := 6, 300
	if testing.Short() || raceEnabled {
		seeds, steps = 3, 150
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runRewindModel(t, seed, steps) })
	}
}

func runRewindModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	w := &workspace{dir: t.TempDir()}
	w.open(t)
	defer func() { _ = w.j.Close() }()

	// states holds the model's state at every seq it saw; current is the
	// state the live tree must show.
	states := map[uint64]state{1: {}, w.j.Head(): {}} // seq 1: the import of the empty tree
	current := state{}
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, after:\n  %s\n%s", seed, strings.Join(log[max(0, len(log)-12):], "\n  "), fmt.Sprintf(format, args...))
	}
	check := func() {
		t.Helper()
		w.live.Lock()
		got := withAgents(t, w.j, snapshotTree(t, w.live.Tree()), w.rw.Agents.States())
		w.live.Unlock()
		if d := diffStates(current, got); d != "" {
			fail("live tree differs from the model: %s", d)
		}
	}
	for i := range steps {
		before := w.j.Head()
		switch k := rng.IntN(20); {
		case k < 13:
			log = append(log, w.step(rng, i))
			w.live.Lock()
			tr := snapshotTree(t, w.live.Tree()) // the tree model checks single ops
			w.live.Unlock()
			next := maps.Clone(tr)
			for p, v := range current {
				if strings.HasPrefix(p, "agent:") {
					next[p] = v
				}
			}
			current = next
			if h := w.j.Head(); h != before {
				states[h] = current
			}
		case k < 14:
			name := []string{"planner", "coder"}[rng.IntN(2)]
			data := fmt.Sprintf("%s state %d", name, i)
			seq, _, err := w.rw.Agents.Save(w.j, w.live, name, []byte(data))
			if err != nil {
				fail("agent save: %v", err)
			}
			current = maps.Clone(current)
			current["agent:"+name] = "s:" + data
			states[seq] = current
			log = append(log, fmt.Sprintf("agent %s saved at %d", name, seq))
		case k < 16:
			g, err := w.rw.Cut(KindManual, fmt.Sprint("cp", i))
			if err != nil {
				fail("checkpoint: %v", err)
			}
			states[g.Seq] = current
			log = append(log, fmt.Sprintf("checkpoint at %d", g.Seq))
		case k < 19:
			seqs := slices.Sorted(maps.Keys(states))
			target := seqs[rng.IntN(len(seqs))]
			if k == 18 && len(log) > 0 {
				// Undo the last rewind if there was one: back to just
				// before its reset record.
				if r := lastReset(t, w.j); r > 0 {
					if _, ok := states[r-1]; ok {
						target = r - 1
					}
				}
			}
			res, err := w.rw.Rewind(target, false)
			if err != nil {
				fail("rewind to %d: %v", target, err)
			}
			log = append(log, fmt.Sprintf("rewind to %d (reset %d, %+v)", target, res.Reset, res.Summary))
			current = states[target]
			for s := before + 1; s <= w.j.Head(); s++ {
				states[s] = current
			}
			// Every state ever seen stays reconstructable, abandoned or not.
			probe := seqs[rng.IntN(len(seqs))]
			got, err := stateAt(t, w, probe)
			if err != nil {
				fail("reconstruct %d: %v", probe, err)
			}
			if d := diffStates(states[probe], got); d != "" {
				fail("reconstruct(%d) differs from the model: %s", probe, d)
			}
		default:
			w.close(t)
			w.open(t)
			log = append(log, "reopen")
		}
		check()
	}
	// Finally every recorded state, through reconstruct.
	for _, s := range slices.Sorted(maps.Keys(states)) {
		got, err := stateAt(t, w, s)
		if err != nil {
			fail("reconstruct %d: %v", s, err)
		}
		if d := diffStates(states[s], got); d != "" {
			fail("final reconstruct(%d) differs from the model: %s", s, d)
		}
	}

	// Retention: keep the newest 3 generations. Every state is then either
	// refused as not retained (below the floor, or on a branch whose
	// generation went) or still exactly the model's, and the head state is
	// always retained; nothing retained names a missing object.
	if err := w.live.Sync(modelCaller); err != nil {
		t.Fatal(err)
	}
	res, err := Retain(w.j, 3, false)
	if err != nil {
		fail("retain: %v", err)
	}
	retained := 0
	for _, s := range slices.Sorted(maps.Keys(states)) {
		got, err := stateAt(t, w, s)
		if errors.Is(err, ErrNotRetained) {
			if s == w.j.Head() {
				fail("after retain (floor %d): head %d is not retained", res.Floor, s)
			}
			continue
		}
		if err != nil {
			fail("after retain (floor %d): reconstruct %d: %v", res.Floor, s, err)
		}
		if s < res.Floor {
			fail("after retain: seq %d below the floor %d reconstructs", s, res.Floor)
		}
		if d := diffStates(states[s], got); d != "" {
			fail("after retain (floor %d): reconstruct(%d) differs from the model: %s", res.Floor, s, d)
		}
		retained++
	}
	gens, err := Generations(w.j)
	if err != nil {
		t.Fatal(err)
	}
	var roots []cas.Hash
	for _, g := range gens {
		r, err := w.j.Get(g)
		if err != nil {
			fail("generation %d after retain: %v", g, err)
		}
		roots = append(roots, r.Root)
	}
	if _, err := cas.Verify(w.j.Objects(), roots); err != nil {
		fail("retained generations after retain: %v", err)
	}
	t.Logf("seed %d: retain kept %d generations from seq %d, dropped %d records and %d objects; %d of %d states retained",
		seed, res.Generations, res.Floor, res.Records, res.Objects, retained, len(states))
}

// lastReset returns the seq of the newest reset record, or 0.
func lastReset(t *testing.T, j *journal.Journal) uint64 {
	t.Helper()
	rs, err := j.Resets()
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 {
		return 0
	}
	seqs := make([]uint64, 0, len(rs))
	for _, r := range rs {
		seqs = append(seqs, r.Seq)
	}
	sort.Slice(seqs, func(a, b int) bool { return seqs[a] < seqs[b] })
	return seqs[len(seqs)-1]
}
