package replica

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
)

// raceScene is gcScene on the fake with a clock, plus a.bin written
// again (the same chunks, which the store's held set says the remote
// holds), cut as g3, ready to push.
func raceScene(t *testing.T, condemn bool) (*gcScene, *objstorefake.Backend, *clock) {
	t.Helper()
	fake := objstorefake.New(t.Name())
	clk := newClock(fake)
	g := newGCScene(t, fake, condemn)
	if condemn && g.firstGC.Condemned.Packs == 0 {
		t.Fatalf("first gc: %+v", g.firstGC)
	}
	g.s.write(t, "a.bin", pattern(1, 200000))
	g.at["g3"] = g.s.cut(t, "three")
	return g, fake, clk
}

// atSegment runs fn once, when the push is about to write its first
// segment (its packs are written, HEAD not yet advanced).
func atSegment(fake *objstorefake.Backend, fn func()) *atomic.Bool {
	var fired atomic.Bool
	fake.SetHook(func(op objstorefake.Op, key string) error {
		if op == objstorefake.OpPut && strings.HasPrefix(key, "ws/w/seg/") && fired.CompareAndSwap(false, true) {
			fn()
		}
		return nil
	})
	return &fired
}

func mustGC(t *testing.T, fake *objstorefake.Backend) *GCResult {
	t.Helper()
	res, err := GC(context.Background(), fake, GCOptions{})
	if err != nil {
		t.Errorf("gc: %v", err)
		return &GCResult{}
	}
	return res
}

func push(t *testing.T, g *gcScene, fake *objstorefake.Backend) *PushResult {
	t.Helper()
	res, err := PushWith(context.Background(), g.s.j, fake, "w", Options{SegmentSize: 300})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestGCRacePushDeleteMidPush (guard a): a.bin's packs are condemned
// before the push starts; the grace passes and a gc deletes them while
// the push, which deduplicated a.bin against its held set, has written
// its packs and not yet HEAD. The push must have sent a.bin again.
func TestGCRacePushDeleteMidPush(t *testing.T) {
	g, fake, clk := raceScene(t, true)
	clk.add(DefaultGrace)
	var del *GCResult
	fired := atSegment(fake, func() { del = mustGC(t, fake) })
	push(t, g, fake)
	fake.SetHook(nil)
	if !fired.Load() || del == nil || del.Deleted.Packs == 0 {
		t.Fatalf("the gc inside the push deleted %+v", del)
	}
	checkRemote(t, fake, g.s, "w", g.at)
}

// TestGCRaceCondemnMidPush (guard b): the push reads its held set and
// the lists (none yet); a gc condemns a.bin's packs before the push
// writes HEAD (nothing reaches them yet); HEAD then reaches them; the
// gc after the grace must find them live again and keep them.
func TestGCRaceCondemnMidPush(t *testing.T) {
	g, fake, clk := raceScene(t, false)
	var cond *GCResult
	fired := atSegment(fake, func() { cond = mustGC(t, fake) })
	push(t, g, fake)
	fake.SetHook(nil)
	if !fired.Load() || cond == nil || cond.Condemned.Packs == 0 {
		t.Fatalf("the gc inside the push condemned %+v", cond)
	}
	clk.add(DefaultGrace)
	res := mustGC(t, fake)
	if res.Revived == 0 {
		t.Errorf("the gc after the grace revived nothing: %+v", res)
	}
	checkRemote(t, fake, g.s, "w", g.at)
}

// TestGCRaceCondemnBeforePush: condemned before the push starts, deleted
// (what is still dead) after it wrote HEAD: both guards hold.
func TestGCRaceCondemnBeforePush(t *testing.T) {
	g, fake, clk := raceScene(t, true)
	pres := push(t, g, fake)
	if pres.Objects == 0 {
		t.Fatalf("push sent nothing: %+v", pres)
	}
	clk.add(DefaultGrace)
	mustGC(t, fake)
	checkRemote(t, fake, g.s, "w", g.at)
}

// TestGCStaleHeldSet: the packs are condemned and deleted before the
// push: the store's held set still names a.bin's chunks. gc/state's
// generation moved, so the push drops the held set, rebuilds it from the
// index files and sends a.bin again.
func TestGCStaleHeldSet(t *testing.T) {
	g, fake, clk := raceScene(t, true)
	clk.add(DefaultGrace)
	if res := mustGC(t, fake); res.Deleted.Packs == 0 || res.Gen != 1 {
		t.Fatalf("gc after the grace: %+v", res)
	}
	pres := push(t, g, fake)
	if pres.Objects == 0 {
		t.Fatalf("push sent nothing: %+v", pres)
	}
	checkRemote(t, fake, g.s, "w", g.at)
	// The generation is recorded: the next push does not rebuild.
	gets := fake.Count(objstorefake.OpGet)
	g.s.write(t, "last", []byte("last\n"))
	g.s.sync(t)
	push(t, g, fake)
	if n := fake.Count(objstorefake.OpGet) - gets; n > 4 {
		t.Errorf("a push after the rebuild made %d GETs, want HEAD, config and gc objects only", n)
	}
	_ = time.Second
}

// TestGCRaceHeldTree (guard a, trees): a directory d (its file's chunks
// alone in a data pack) is removed and forgotten, so its inode object is
// dead in a kept tree pack and its chunks' pack is condemned. A rewind
// to g1 and a generation bring the same root inode object back, which
// the store holds with its whole subtree. While a list is pending the push must not skip that
// subtree: a gc deleting the chunks' pack mid-push would take them.
func TestGCRaceHeldTree(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New(t.Name())
	clk := newClock(fake)
	s := newSource(t)
	at := map[string]uint64{}
	s.write(t, "keep", nil)
	s.mkdir(t, "d")
	s.write(t, "d/f", pattern(5, 150000))
	at["g1"] = s.cut(t, "one")
	o := Options{SegmentSize: 300}
	if _, err := PushWith(ctx, s.j, fake, "w", o); err != nil {
		t.Fatal(err)
	}
	s.unlink(t, "d/f")
	if err := s.live.Rmdir(caller, s.lookup(t, ""), "d"); err != nil {
		t.Fatal(err)
	}
	at["g2"] = s.cut(t, "two")
	if _, err := PushWith(ctx, s.j, fake, "w", o); err != nil {
		t.Fatal(err)
	}
	if _, err := Forget(ctx, fake, "w", "g3"); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Minute)
	if res := mustGC(t, fake); res.Condemned.Packs == 0 || res.DeadBytes == 0 {
		t.Fatalf("first gc: %+v; want the chunks' pack condemned and d's inode dead in a kept pack", res)
	}
	if _, err := s.rw.Rewind(at["g1"], false); err != nil {
		t.Fatal(err)
	}
	at["g3"] = s.cut(t, "three")
	clk.add(DefaultGrace)
	var del *GCResult
	fired := atSegment(fake, func() { del = mustGC(t, fake) })
	if _, err := PushWith(ctx, s.j, fake, "w", o); err != nil {
		t.Fatal(err)
	}
	fake.SetHook(nil)
	if !fired.Load() || del == nil || del.Deleted.Packs == 0 {
		t.Fatalf("the gc inside the push deleted %+v", del)
	}
	checkRemote(t, fake, s, "w", at)
}
