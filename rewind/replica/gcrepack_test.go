package replica

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
)

// repackScene: a.bin (600 kB) and d.bin (400 kB) pushed in one data
// pack (g1); a.bin removed (g2), pushed, and forgotten up to g2, so the
// pack is 60% dead.
func repackScene(t *testing.T) (*gcScene, *objstorefake.Backend, *clock) {
	t.Helper()
	ctx := context.Background()
	fake := objstorefake.New(t.Name())
	clk := newClock(fake)
	g := &gcScene{s: newSource(t), b: fake, at: map[string]uint64{}}
	g.s.write(t, "a.bin", pattern(1, 600000))
	g.s.write(t, "d.bin", pattern(4, 400000))
	g.at["g1"] = g.s.cut(t, "one")
	if _, err := Push(ctx, g.s.j, fake, "w"); err != nil {
		t.Fatal(err)
	}
	g.s.unlink(t, "a.bin")
	g.at["g2"] = g.s.cut(t, "two")
	if _, err := Push(ctx, g.s.j, fake, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := Forget(ctx, fake, "w", strconv.FormatUint(g.at["g2"], 10)); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Minute)
	return g, fake, clk
}

func packBytes(t *testing.T, b objstore.Backend) (n int64) {
	t.Helper()
	if err := b.List(context.Background(), "packs/", func(i objstore.Info) error { n += i.Size; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestGCRepack: the first run copies d.bin's chunks into a new pack and
// condemns the old one (a clone is exact meanwhile); the run after the
// grace deletes it, and the remote shrinks by about a.bin.
func TestGCRepack(t *testing.T) {
	ctx := context.Background()
	g, fake, clk := repackScene(t)
	before := packBytes(t, fake)
	dry, err := GC(ctx, fake, GCOptions{DryRun: true})
	if err != nil || dry.Repacked.Packs != 1 || dry.Repacked.Written != 0 || packBytes(t, fake) != before {
		t.Fatalf("dry run: %+v, %v (or it wrote)", dry, err)
	}
	if no, err := GC(ctx, fake, GCOptions{DryRun: true, NoRepack: true}); err != nil || no.Repacked.Packs != 0 {
		t.Fatalf("dry run without repack: %+v, %v", no, err)
	}
	res, err := GC(ctx, fake, GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Repacked.Packs != 1 || res.Repacked.Written != 1 || res.Repacked.LiveBytes < 390000 || len(res.Lists) != 1 {
		t.Fatalf("first gc: %+v; want one pack repacked into one", res)
	}
	data, _, err := fake.Get(ctx, res.Lists[0])
	if err != nil {
		t.Fatal(err)
	}
	var list Condemned
	if err := strict(res.Lists[0], data, &list); err != nil {
		t.Fatal(err)
	}
	checkRemote(t, fake, g.s, "w", g.at)
	clk.add(DefaultGrace)
	res2, err := GC(ctx, fake, GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Deleted.Packs != len(list.Packs) || res2.Revived != 0 || res2.Repacked.Packs != 0 {
		t.Fatalf("gc after the grace: %+v; the list named %d packs", res2, len(list.Packs))
	}
	for _, k := range allKeys(t, fake) {
		for _, id := range list.Packs {
			if strings.Contains(k, id) {
				t.Errorf("%s (repacked) is still there", k)
			}
		}
	}
	if after := packBytes(t, fake); before-after < 550000 {
		t.Errorf("packs: %d bytes before, %d after; want a.bin's ~600 kB freed", before, after)
	}
	checkRemote(t, fake, g.s, "w", g.at)
}

// TestGCRepackRace (guard b): a push that read its held set before the
// repack's list writes a.bin again, deduplicated against the old pack;
// the repack (run while the push is between its packs and HEAD) did
// not copy a.bin's chunks, dead then. The run after the grace must find
// the old pack live again and keep it.
func TestGCRepackRace(t *testing.T) {
	g, fake, clk := repackScene(t)
	g.s.write(t, "a.bin", pattern(1, 600000))
	g.at["g3"] = g.s.cut(t, "three")
	var first *GCResult
	fired := atSegment(fake, func() { first = mustGC(t, fake) })
	pres := push(t, g, fake)
	fake.SetHook(nil)
	if !fired.Load() || first == nil || first.Repacked.Packs != 1 {
		t.Fatalf("the gc inside the push: %+v", first)
	}
	if pres.Bytes > 100000 {
		t.Fatalf("the push sent %d bytes: it did not deduplicate a.bin against the old pack", pres.Bytes)
	}
	clk.add(DefaultGrace)
	res := mustGC(t, fake)
	if res.Revived == 0 {
		t.Fatalf("gc after the grace: %+v; want the old pack revived", res)
	}
	checkRemote(t, fake, g.s, "w", g.at)
	if keys := allKeys(t, fake); !slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, "packs/") }) {
		t.Fatalf("no packs left: %v", keys)
	}
}
