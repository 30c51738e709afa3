package tree

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// TestGraftModel: random histories of namespace, attribute, xattr and data
// operations; grafting the tree of any one step onto the tree of any other
// gives exactly the loaded tree of the first: same namespace and link
// counts, same Merkle root without a new object, and Check passes.
func TestGraftModel(t *testing.T) {
	seeds := 12
	if raceEnabled {
		seeds = 4
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runGraftModel(t, seed) })
	}
}

func runGraftModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	tr, s := newTestTree(t)
	names := []string{"a", "b", "c", "d"}
	next := uint64(2)
	var dirs, files []uint64
	dirs = append(dirs, RootIno)
	pick := func(l []uint64) uint64 {
		if len(l) == 0 {
			return RootIno
		}
		return l[rng.IntN(len(l))]
	}
	name := func() string { return names[rng.IntN(len(names))] }
	roots := []cas.Hash{storeRoot(t, tr, s)}
	for step := range 300 {
		var r *journal.Record
		switch k := rng.IntN(12); k {
		case 0, 1:
			r = rCreate(pick(dirs), name(), next)
		case 2:
			r = rMkdir(pick(dirs), name(), next)
		case 3:
			r = rSymlink(pick(dirs), name(), next, fmt.Sprint("t", step))
		case 4:
			r = rLink(pick(files), pick(dirs), name())
		case 5:
			r = rUnlink(pick(dirs), name())
		case 6:
			r = rRmdir(pick(dirs), name())
		case 7, 8:
			r = rRename(pick(dirs), name(), pick(dirs), name(), uint32(rng.IntN(3)))
		case 9:
			r = rChmod(pick(append(files, dirs...)), uint32(rng.IntN(0o777)), int64(step))
		case 10:
			r = rSetxattr(pick(files), "user.x", fmt.Sprint(step), 0)
		default:
			ino := pick(files)
			if n := tr.Node(ino); n != nil && n.IsReg() {
				_ = tr.WriteAt(n, []byte(fmt.Sprintf("step %d", step)), uint64(rng.IntN(3))*cas.ChunkSize, int64(step))
				flushApply(t, tr, s, n)
			}
		}
		if r != nil {
			r.Time = int64(step + 1)
			if tr.Apply(r) == nil && r.Ino == next {
				if r.Op == journal.OpMkdir {
					dirs = append(dirs, next)
				} else {
					files = append(files, next)
				}
				next++
			}
		}
		roots = append(roots, storeRoot(t, tr, s))
	}
	for range 60 {
		from, to := roots[rng.IntN(len(roots))], roots[rng.IntN(len(roots))]
		g, err := Load(s, from)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Graft(to); err != nil {
			t.Fatalf("seed %d: graft %s -> %s: %v", seed, from.Short(), to.Short(), err)
		}
		want, err := Load(s, to)
		if err != nil {
			t.Fatal(err)
		}
		desc := fmt.Sprintf("seed %d: graft %s -> %s", seed, from.Short(), to.Short())
		if err := g.Check(); err != nil {
			t.Fatalf("%s: Check: %v", desc, err)
		}
		if d := diffSnapshots(snapshot(want), snapshot(g)); d != "" {
			t.Fatalf("%s: namespace differs from the loaded tree:\n%s", desc, d)
		}
		if g.Len() != want.Len() {
			t.Fatalf("%s: %d inodes, loaded tree %d", desc, g.Len(), want.Len())
		}
		root, blobs, err := g.Root()
		if err != nil || root != to || len(blobs) != 0 {
			t.Fatalf("%s: root after graft %s (%d new objects), %v", desc, root.Short(), len(blobs), err)
		}
		// And the grafted tree goes on like any other.
		if err := g.Apply(rMkdir(RootIno, "after-graft", 1<<40)); err != nil {
			t.Fatalf("%s: apply after graft: %v", desc, err)
		}
		if err := g.Check(); err != nil {
			t.Fatalf("%s: Check after apply: %v", desc, err)
		}
	}
}
