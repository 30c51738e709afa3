package replica

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
	"github.com/reynfs/reynfs/rewind"
)

// clock is a server clock the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(fake *objstorefake.Backend) *clock {
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	fake.SetClock(c.now)
	return c
}

// now moves a second at each call: what a push writes is older, by the
// server's clock, than a gc's list made after it (HTTP dates have
// seconds).
func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// gcScene is a workspace w whose file a.bin is written (g1), pushed,
// removed (g2), pushed, and forgotten up to g2 (g3 on the remote: the
// import is g1): a.bin's chunks are
// reached by nothing on the remote.
type gcScene struct {
	s       *source
	b       objstore.Backend
	at      map[string]uint64
	firstGC *GCResult
}

func newGCScene(t *testing.T, b objstore.Backend, condemn bool) *gcScene {
	t.Helper()
	return newGCSceneWith(t, b, condemn, nil)
}

// newGCSceneWith is newGCScene; beforeForget runs before the forget.
func newGCSceneWith(t *testing.T, b objstore.Backend, condemn bool, beforeForget func(*gcScene)) *gcScene {
	t.Helper()
	ctx := context.Background()
	g := &gcScene{s: newSource(t), b: b, at: map[string]uint64{}}
	g.s.write(t, "a.bin", pattern(1, 200000))
	g.s.write(t, "keep.txt", []byte("kept\n"))
	g.at["g1"] = g.s.cut(t, "one")
	if _, err := PushWith(ctx, g.s.j, b, "w", Options{SegmentSize: 300}); err != nil {
		t.Fatal(err)
	}
	g.s.unlink(t, "a.bin")
	g.s.write(t, "b.txt", []byte("bee\n"))
	g.at["g2"] = g.s.cut(t, "two")
	g.s.write(t, "tail.txt", []byte("tail\n"))
	g.s.sync(t)
	g.at["head"] = g.s.j.Head()
	if _, err := PushWith(ctx, g.s.j, b, "w", Options{SegmentSize: 300}); err != nil {
		t.Fatal(err)
	}
	if beforeForget != nil {
		beforeForget(g)
	}
	if res, err := Forget(ctx, b, "w", strconv.FormatUint(g.at["g2"], 10)); err != nil || !res.Changed || res.Floor != g.at["g2"] || res.Dropped != 2 || res.ID != 3 {
		t.Fatalf("forget g2: %+v, %v (at %v)", res, err, g.at)
	}
	if condemn {
		if _, fake := b.(*objstorefake.Backend); !fake {
			// The list must be newer than what was pushed, by the
			// server's Date (seconds; versitygw's may lag by one).
			time.Sleep(2100 * time.Millisecond)
		}
		res, err := GC(ctx, b, GCOptions{})
		if err != nil {
			t.Fatal(err)
		}
		g.firstGC = res
	}
	return g
}

func allKeys(t *testing.T, b objstore.Backend) []string {
	t.Helper()
	var out []string
	if err := b.List(context.Background(), "", func(i objstore.Info) error { out = append(out, i.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkRemote: fsck --remote is clean, and a clone of w at head is the
// source's head exactly, with gN naming the same generations.
func checkRemote(t *testing.T, b objstore.Backend, src *source, ws string, at map[string]uint64) {
	t.Helper()
	ctx := context.Background()
	rep, err := Fsck(ctx, b, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Damaged() {
		t.Fatalf("fsck --remote: %v", rep.Problems)
	}
	dir := filepath.Join(t.TempDir(), "clone")
	if _, err := Clone(ctx, b, ws, dir, ""); err != nil {
		t.Fatal(err)
	}
	cj := openClone(t, dir)
	if cj.Head() != src.j.Head() {
		t.Fatalf("clone head %d, source %d", cj.Head(), src.j.Head())
	}
	keep := map[string]uint64{}
	floor, err := cj.Floor()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range at {
		if v >= floor {
			keep[k] = v
		}
	}
	checkClone(t, src.j, keep, cj, src.j.Head())
	for name, seq := range keep {
		if !strings.HasPrefix(name, "g") {
			continue
		}
		a, aerr := rewind.GenerationID(src.j, seq)
		c, cerr := rewind.GenerationID(cj, seq)
		if aerr != nil || cerr != nil || a != c {
			t.Errorf("%s (seq %d): g%d (%v) in the source, g%d (%v) in the clone", name, seq, a, aerr, c, cerr)
		}
	}
}

// TestGCTwoPhase: after a forget, a first gc condemns a.bin's packs and
// the segments below the floor and deletes nothing; before the grace (by
// the server's clock) nothing goes; after it they are deleted, fsck
// --remote is clean and a clone at head is exact.
func TestGCTwoPhase(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("gc")
	clk := newClock(fake)
	g := newGCScene(t, fake, false)
	clk.add(time.Minute)
	before := allKeys(t, fake)
	res, err := GC(ctx, fake, GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Condemned.Packs == 0 || res.Condemned.Segments == 0 || res.Deleted.Packs+res.Deleted.Segments != 0 || len(res.Lists) != 1 {
		t.Fatalf("first gc: %+v", res)
	}
	after := allKeys(t, fake)
	if want := append(slices.Clone(before), res.Lists[0]); !slices.Equal(after, slices.Sorted(slices.Values(want))) {
		t.Fatalf("the first gc changed more than its list:\n%v\n%v", before, after)
	}
	data, _, err := fake.Get(ctx, res.Lists[0])
	if err != nil {
		t.Fatal(err)
	}
	var list Condemned
	if err := strict(res.Lists[0], data, &list); err != nil || len(list.Packs) != res.Condemned.Packs {
		t.Fatalf("%s: %+v, %v", res.Lists[0], list, err)
	}
	clk.add(DefaultGrace - time.Minute)
	if res, err := GC(ctx, fake, GCOptions{}); err != nil || res.Deleted.Packs+res.Deleted.Segments != 0 || res.Pending.Packs == 0 {
		t.Fatalf("gc inside the grace: %+v, %v", res, err)
	}
	clk.add(time.Minute)
	keys := allKeys(t, fake)
	dry, err := GC(ctx, fake, GCOptions{DryRun: true})
	if err != nil || dry.Deleted != res.Condemned || len(dry.Removed) != 1 || !slices.Equal(allKeys(t, fake), keys) {
		t.Fatalf("dry run after the grace: %+v, %v (or it changed the remote)", dry, err)
	}
	res2, err := GC(ctx, fake, GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Deleted.Packs != res.Condemned.Packs || res2.Deleted.Segments != res.Condemned.Segments || res2.Deleted.PackBytes != res.Condemned.PackBytes || len(res2.Removed) != 1 || res2.Gen != 1 {
		t.Fatalf("gc after the grace deleted %+v; the first condemned %+v", res2, res)
	}
	left := allKeys(t, fake)
	for _, k := range append(slices.Clone(list.Segments), list.Packs...) {
		for _, l := range left {
			if strings.Contains(l, k) {
				t.Errorf("%s (condemned) is still there", l)
			}
		}
	}
	checkRemote(t, fake, g.s, "w", g.at)
	// Nothing more to do.
	if res3, err := GC(ctx, fake, GCOptions{}); err != nil || res3.Condemned.Packs+res3.Condemned.Segments != 0 || len(res3.Lists) != 0 {
		t.Fatalf("a third gc: %+v, %v", res3, err)
	}
}

// TestGCTwoPhaseDir runs the two phases on file:// and, when versitygw
// is there, S3 (the server's clock: grace of a nanosecond, a second
// apart since an HTTP Date has seconds).
func TestGCTwoPhaseServers(t *testing.T) {
	for _, name := range []string{"dir", "s3"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b := backends(t)[name](t)
			g := newGCScene(t, b, true)
			if g.firstGC.Condemned.Packs == 0 {
				t.Fatalf("first gc: %+v", g.firstGC)
			}
			time.Sleep(2100 * time.Millisecond)
			res, err := GC(ctx, b, GCOptions{Grace: time.Nanosecond})
			if err != nil {
				t.Fatal(err)
			}
			if res.Deleted.Packs != g.firstGC.Condemned.Packs || res.Deleted.Segments != g.firstGC.Condemned.Segments {
				t.Fatalf("deleted %+v, condemned %+v (%+v)", res.Deleted, g.firstGC.Condemned, res)
			}
			checkRemote(t, b, g.s, "w", g.at)
		})
	}
}

// TestForgetRefuses: bad targets and a live lease get one-line errors.
func TestForgetRefuses(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("forget")
	g := newGCScene(t, fake, false)
	for target, want := range map[string]string{
		"g9":    "no generation g9",
		"g0":    "want gN",
		"x":     "want gN",
		"99999": "past the remote's head",
		"1":     "below what the remote keeps",
		"g1":    "no generation g1",
	} {
		_, err := Forget(ctx, fake, "w", target)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("forget %s: %v, want one line with %q", target, err, want)
		}
	}
	if res, err := Forget(ctx, fake, "w", "g3"); err != nil || res.Changed {
		t.Errorf("forget g3 again: %+v, %v, want nothing to do", res, err)
	}
	if _, err := Forget(ctx, fake, "w", strconv.FormatUint(g.at["head"], 10)); err == nil || !strings.Contains(err.Error(), "not a generation") {
		t.Errorf("forget of a seq that is no generation: %v", err)
	}
	// A push holding the lease.
	var held atomic.Bool
	fake.SetHook(func(op objstorefake.Op, key string) error {
		if op == objstorefake.OpPut && strings.Contains(key, "/seg/") && held.CompareAndSwap(false, true) {
			if _, err := Forget(ctx, fake, "w", "g3"); err == nil || !strings.Contains(err.Error(), "remote locked by") {
				t.Errorf("forget under a push's lease: %v", err)
			}
		}
		return nil
	})
	g.s.write(t, "more", []byte("more\n"))
	g.s.sync(t)
	if _, err := Push(ctx, g.s.j, fake, "w"); err != nil || !held.Load() {
		t.Fatalf("push: %v (hook ran: %v)", err, held.Load())
	}
}
