package replica

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
)

// TestGCKeepsWhatAForkReads: f forks w at g1 (a.bin there); w forgets up
// to g2. gc keeps w's segments through g1 and a.bin's packs (f reads
// them) and collects only w's segments f and w both skip; afterwards a
// clone of f is w's state at g1 and a clone of w is exact.
func TestGCKeepsWhatAForkReads(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("gcfork")
	clk := newClock(fake)
	g := newGCSceneWith(t, fake, false, func(g *gcScene) {
		if _, err := Fork(ctx, fake, "w", g.at["g1"], "f"); err != nil {
			t.Fatal(err)
		}
	})
	clk.add(time.Minute)
	res := mustGC(t, fake)
	if res.Condemned.Packs != 0 {
		t.Errorf("gc condemned %d packs; f reaches all of them: %+v", res.Condemned.Packs, res)
	}
	lists, err := readCondemned(ctx, fake)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lists {
		for _, k := range l.c.Segments {
			if _, first, _, ok := ParseSegmentKey("w", k); !ok || first <= g.at["g1"] {
				t.Errorf("condemned %s: f reads w's segments through seq %d", k, g.at["g1"])
			}
		}
	}
	clk.add(DefaultGrace)
	mustGC(t, fake)
	checkRemote(t, fake, g.s, "w", g.at)
	dir := filepath.Join(t.TempDir(), "f")
	if _, err := Clone(ctx, fake, "f", dir, ""); err != nil {
		t.Fatal(err)
	}
	cj := openClone(t, dir)
	if cj.Head() != g.at["g1"] {
		t.Fatalf("f's clone ends at %d, want %d", cj.Head(), g.at["g1"])
	}
	checkClone(t, g.s.j, map[string]uint64{"g1": g.at["g1"]}, cj, g.at["g1"])
	if rep, err := Fsck(ctx, fake, "f"); err != nil || rep.Damaged() {
		t.Fatalf("fsck --remote f: %+v, %v", rep, err)
	}
	// fsck of f checks w's segments that only f reads (below w's Start).
	wh, _, err := ReadHead(ctx, fake, "w")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range fake.Keys() {
		if _, _, last, ok := ParseSegmentKey("w", k); ok && last < wh.Start() {
			if err := fake.Delete(ctx, k); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if rep, err := Fsck(ctx, fake, "f"); err != nil || !rep.Damaged() {
		t.Fatalf("fsck --remote f after a segment only f reads went: %+v, %v", rep, err)
	}
}

// TestFetchAfterForget: a clone made before a forget whose floor passes
// the seqs it fetched is refused by fetch (records past a gap would
// replay wrong states), with a one-line error; a clone made after
// fetches.
func TestFetchAfterForget(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("fetchforget")
	s := newSource(t)
	s.write(t, "a", []byte("a\n"))
	s.cut(t, "one")
	if _, err := Push(ctx, s.j, fake, "w"); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "old")
	if _, err := Clone(ctx, fake, "w", old, ""); err != nil {
		t.Fatal(err)
	}
	s.write(t, "b", []byte("b\n"))
	s.cut(t, "two")
	s.write(t, "c", []byte("c\n"))
	g4 := s.cut(t, "three")
	if _, err := Push(ctx, s.j, fake, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := Forget(ctx, fake, "w", "g4"); err != nil {
		t.Fatal(err)
	}
	oj := openClone(t, old)
	_, err := Fetch(ctx, oj, fake, "w")
	if err == nil || !strings.Contains(err.Error(), "clone it again") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("fetch over a forgotten gap: %v", err)
	}
	if oj.Head() >= g4 {
		t.Fatalf("the refused fetch wrote records through %d", oj.Head())
	}
}
