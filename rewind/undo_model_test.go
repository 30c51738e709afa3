package rewind

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The model-based undo/redo test: random file operations, rewinds,
// restores, undos, redos and reopens, against a model that keeps every
// state by seq and its own two stacks of operations (ops.go's rule, written
// out independently): after every step the live tree must be the model's,
// and the op log read back from the journal must name the same operations
// for undo and redo.

// modelOp is one user operation on the model's stacks: its id, its path
// (restores), and the seq of the state just before the record that last
// applied it (done) or undid it (undone).
type modelOp struct {
	id     uint64
	path   string
	before uint64
}

// restorePath is the model's restore: p and everything under it as in
// from, nothing of it as in cur.
func restorePath(cur, from state, p string) state {
	out := state{}
	for k, v := range cur {
		if k != p && !strings.HasPrefix(k, p+"/") {
			out[k] = v
		}
	}
	for k, v := range from {
		if k == p || strings.HasPrefix(k, p+"/") {
			out[k] = v
		}
	}
	return out
}

// restorable says whether the model expects restoring p from `from` into
// cur to work: p existed there and its parent directory exists now.
func restorable(cur, from state, p string) bool {
	if _, ok := from[p]; !ok {
		return false
	}
	dir := p[:max(0, strings.LastIndex(p, "/"))]
	return dir == "" || cur[dir] == "d"
}

func TestUndoModel(t *testing.T) {
	seeds, steps := 4, 150
	if testing.Short() || raceEnabled {
		seeds, steps = 3, 100
	}
	total := map[string]int{}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			for k, n := range runUndoModel(t, seed, steps) {
				total[k] += n
			}
		})
	}
	// The seeds together must have tried every kind, several times.
	for _, k := range []string{"rewind", "restore", "undo", "redo"} {
		if total[k] < 5 {
			t.Errorf("too few operations tried: %v", total)
			break
		}
	}
}

func runUndoModel(t *testing.T, seed uint64, steps int) map[string]int {
	rng := rand.New(rand.NewPCG(seed, 0x0d0))
	w := &workspace{dir: t.TempDir()}
	w.open(t)
	defer func() { _ = w.j.Close() }()

	states := map[uint64]state{w.j.Head(): {}}
	current := state{}
	var done, undone []modelOp
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, after:\n  %s\n%s", seed, strings.Join(log[max(0, len(log)-15):], "\n  "), fmt.Sprintf(format, args...))
	}
	live := func() state {
		w.live.Lock()
		defer w.live.Unlock()
		return snapshotTree(t, w.live.Tree())
	}
	paths := []string{"a", "b", "d", "d/a", "d/e", "d/e/a"}
	counts := map[string]int{}
	for i := range steps {
		before := w.j.Head()
		k := rng.IntN(20)
		switch {
		case k < 9:
			log = append(log, w.step(rng, i))
			current = live() // the rewind model checks single ops
		case k < 11:
			seqs := slices.Sorted(maps.Keys(states))
			target := seqs[rng.IntN(len(seqs))]
			res, err := w.rw.Rewind(target, false)
			if err != nil {
				fail("rewind to %d: %v", target, err)
			}
			log = append(log, fmt.Sprintf("rewind to %d (op %d)", target, res.Reset))
			current = states[target]
			done, undone = append(done, modelOp{id: res.Reset, before: before}), nil
			counts["rewind"]++
		case k < 13:
			seqs := slices.Sorted(maps.Keys(states))
			from := seqs[rng.IntN(len(seqs))]
			p := paths[rng.IntN(len(paths))]
			if have := slices.Sorted(maps.Keys(states[from])); len(have) > 0 && rng.IntN(4) > 0 {
				p = have[rng.IntN(len(have))] // mostly a path that was there
			}
			rr, err := w.rw.Restore(p, from, "")
			want := restorable(current, states[from], p)
			log = append(log, fmt.Sprintf("restore %s from %d: %v", p, from, err))
			if want != (err == nil) {
				fail("restore %s from %d: %v, want success %v", p, from, err, want)
			}
			if err == nil {
				current = restorePath(current, states[from], p)
				done, undone = append(done, modelOp{id: rr.Seq, path: p, before: before}), nil
				counts["restore"]++
			}
		case k < 18:
			redo := k >= 15
			stack := &done
			if redo {
				stack = &undone
			}
			m, res, rr, err := w.rw.Undo(redo, "")
			verb := map[bool]string{false: "undo", true: "redo"}[redo]
			if len(*stack) == 0 {
				if !errors.Is(err, ErrNothing) {
					fail("%s with nothing to %s: %v, want ErrNothing", verb, verb, err)
				}
				log = append(log, verb+": nothing")
				break
			}
			top := (*stack)[len(*stack)-1]
			if m == nil || m.Of != top.id || m.Target != top.before {
				fail("%s: move %+v, want of %d to %d", verb, m, top.id, top.before)
			}
			if top.path != "" && !restorable(current, states[top.before], top.path) {
				if err == nil {
					fail("%s of restore %s from %d worked, want a refusal", verb, top.path, top.before)
				}
				log = append(log, fmt.Sprintf("%s %d: refused: %v", verb, top.id, err))
				break
			}
			if err != nil {
				fail("%s of %d: %v", verb, top.id, err)
			}
			*stack = (*stack)[:len(*stack)-1]
			moved := modelOp{id: top.id, path: top.path, before: before}
			if redo {
				done = append(done, moved)
			} else {
				undone = append(undone, moved)
			}
			if top.path == "" {
				current = states[top.before]
				log = append(log, fmt.Sprintf("%s %d: rewind to %d (reset %d)", verb, top.id, top.before, res.Reset))
			} else {
				current = restorePath(current, states[top.before], top.path)
				log = append(log, fmt.Sprintf("%s %d: restore %s from %d (seq %d)", verb, top.id, top.path, top.before, rr.Seq))
			}
			counts[verb]++
		default:
			w.close(t)
			w.open(t)
			if rng.IntN(2) == 0 { // as the daemon opens: the restore index caught up
				if err := Reindex(w.j); err != nil {
					fail("reindex: %v", err)
				}
			}
			log = append(log, "reopen")
		}
		if d := diffStates(current, live()); d != "" {
			fail("live tree differs from the model: %s", d)
		}
		states[w.j.Head()] = current
		// The op log, read back from the journal, agrees on what undo
		// and redo would act on.
		l, err := Ops(w.j)
		if err != nil {
			fail("op log: %v", err)
		}
		var wantUndo, wantRedo uint64
		if len(done) > 0 {
			wantUndo = done[len(done)-1].id
		}
		if len(undone) > 0 {
			wantRedo = undone[len(undone)-1].id
		}
		if l.Undo != wantUndo || l.Redo != wantRedo {
			fail("op log: undo %d redo %d, want %d and %d", l.Undo, l.Redo, wantUndo, wantRedo)
		}
	}
	t.Logf("seed %d: %v", seed, counts)
	return counts
}
