package rewind

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// TestGraftDiffIsDiffRoots: a rewind takes its change list (and so the
// kernel invalidations) from the graft's walk instead of DiffRoots. On
// random histories of namespace, attribute, xattr and data operations
// (hard links, renames of directories, replaced names), grafting any
// state onto any other yields exactly DiffRoots' list of the two roots.
func TestGraftDiffIsDiffRoots(t *testing.T) {
	seeds := 10
	if raceEnabled {
		seeds = 3
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runGraftDiff(t, seed) })
	}
}

func runGraftDiff(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	s := cas.NewMemory()
	tr := tree.New(s, 0o755, 0, 0, 1)
	root := func() cas.Hash {
		h, blobs, err := tr.Root()
		if err != nil {
			t.Fatal(err)
		}
		if err := StoreBlobs(s, blobs); err != nil {
			t.Fatal(err)
		}
		return h
	}
	names := []string{"a", "b", "c", "d"}
	next := uint64(tree.RootIno + 1)
	dirs, files := []uint64{tree.RootIno}, []uint64{}
	pick := func(l []uint64) uint64 {
		if len(l) == 0 {
			return tree.RootIno
		}
		return l[rng.IntN(len(l))]
	}
	name := func() string { return names[rng.IntN(len(names))] }
	roots := []cas.Hash{root()}
	for step := range 250 {
		now := int64(step + 100)
		var r *journal.Record
		switch rng.IntN(12) {
		case 0, 1:
			r = &journal.Record{Op: journal.OpCreate, Parent: pick(dirs), Name: name(), Ino: next, Mode: syscall.S_IFREG | 0o644}
		case 2, 3:
			r = &journal.Record{Op: journal.OpMkdir, Parent: pick(dirs), Name: name(), Ino: next, Mode: 0o755}
		case 4:
			r = &journal.Record{Op: journal.OpSymlink, Parent: pick(dirs), Name: name(), Ino: next, Target: fmt.Sprint("t", step)}
		case 5:
			r = &journal.Record{Op: journal.OpLink, Ino: pick(files), Parent: pick(dirs), Name: name()}
		case 6:
			r = &journal.Record{Op: journal.OpUnlink, Parent: pick(dirs), Name: name()}
		case 7:
			r = &journal.Record{Op: journal.OpRmdir, Parent: pick(dirs), Name: name()}
		case 8, 9:
			r = &journal.Record{Op: journal.OpRename, Parent: pick(dirs), Name: name(), NewParent: pick(dirs), NewName: name(), Flags: uint32(rng.IntN(3))}
		case 10:
			if rng.IntN(2) == 0 {
				r = &journal.Record{Op: journal.OpSetattr, Ino: pick(append(files, dirs...)), Valid: journal.SetMode, Mode: uint32(rng.IntN(0o777))}
			} else {
				r = &journal.Record{Op: journal.OpSetxattr, Ino: pick(append(files, dirs...)), XName: "user.x", XValue: []byte(fmt.Sprint(step))}
			}
		default:
			ino := pick(files)
			if n := tr.Node(ino); n != nil && n.IsReg() {
				data := fmt.Appendf(nil, "step %d", step)
				h, err := s.Put(data)
				if err != nil {
					t.Fatal(err)
				}
				r = &journal.Record{Op: journal.OpData, Ino: ino, Size: uint64(len(data)), Kind: journal.DataWrite,
					Chunks: []journal.Chunk{{Index: 0, Hash: h}}, Mtime: now}
			}
		}
		if r == nil {
			continue
		}
		r.Time = now
		if tr.Apply(r) == nil && r.Ino == next && r.Op != journal.OpLink {
			if r.Op == journal.OpMkdir {
				dirs = append(dirs, next)
			} else if r.Op == journal.OpCreate {
				files = append(files, next)
			}
			next++
		}
		roots = append(roots, root())
	}
	for range 80 {
		from, to := roots[rng.IntN(len(roots))], roots[rng.IntN(len(roots))]
		desc := fmt.Sprintf("seed %d: %s -> %s", seed, from.Short(), to.Short())
		want, err := DiffRoots(s, from, to)
		if err != nil {
			t.Fatal(err)
		}
		g, err := tree.Load(s, roots[rng.IntN(len(roots))])
		if err != nil {
			t.Fatal(err)
		}
		// A graft to from leaves the directories it changed with their
		// entry lists cached and the others without: both are compared.
		if err := g.Graft(from); err != nil {
			t.Fatalf("%s: graft to from: %v", desc, err)
		}
		tcs, err := g.GraftDiff(to)
		if err != nil {
			t.Fatalf("%s: graft: %v", desc, err)
		}
		if got, w := changeLines(fromTree(tcs)), changeLines(want); !slices.Equal(got, w) {
			t.Fatalf("%s: graft's changes differ from DiffRoots':\ngot  %s\nwant %s", desc, strings.Join(got, "\n     "), strings.Join(w, "\n     "))
		}
	}
}

// changeLines prints changes with their invalidation fields, sorted.
func changeLines(cs []Change) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s %s ino=%d dir=%v mode=%o old=%s new=%s entry=%v par=%d name=%q",
			c.Path, c.Kind, c.Ino, c.Dir, c.Mode, c.Old.Short(), c.New.Short(), c.entry, c.par, c.name))
	}
	slices.Sort(out)
	return out
}
