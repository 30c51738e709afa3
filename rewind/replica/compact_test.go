package replica

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
	"github.com/reynfs/reynfs/journal"
)

// onePush writes one small file (a few records) and pushes it.
func onePush(t *testing.T, s *source, b objstore.Backend, ws string, i int) *PushResult {
	t.Helper()
	s.write(t, fmt.Sprintf("f%d.txt", i%7), []byte(fmt.Sprintf("round %d\n", i)))
	s.sync(t)
	res, err := PushWith(context.Background(), s.j, b, ws, Options{})
	if err != nil {
		t.Fatalf("push %d: %v", i, err)
	}
	return res
}

// tiling returns the segment keys a reader of ws reads (clone's cover).
func tiling(t *testing.T, b objstore.Backend, ws string) []string {
	t.Helper()
	h, _, err := ReadHead(context.Background(), b, ws)
	if err != nil {
		t.Fatal(err)
	}
	rd := &segReader{ctx: context.Background(), b: b}
	if _, err := rd.records(ws, h, 1, h.Seq, 0); err != nil {
		t.Fatal(err)
	}
	return rd.keys
}

// segGets counts the GETs of segment keys made through b.
type segGets struct {
	objstore.Backend
	n atomic.Int64
}

func (g *segGets) Get(ctx context.Context, key string) ([]byte, objstore.Info, error) {
	if strings.Contains(key, "/seg/") {
		g.n.Add(1)
	}
	return g.Backend.Get(ctx, key)
}

// sameRecords fails unless cj holds src's records through head, byte
// for byte (from src's floor: below it src dropped records).
func sameRecords(t *testing.T, src, cj *journal.Journal, head uint64) {
	t.Helper()
	floor, err := src.Floor()
	if err != nil {
		t.Fatal(err)
	}
	var a, b [][]byte
	for _, x := range []struct {
		j   *journal.Journal
		out *[][]byte
	}{{src, &a}, {cj, &b}} {
		err := x.j.Iter(floor, func(r *journal.Record) error {
			if r.Seq <= head {
				*x.out = append(*x.out, journal.Encode(r))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(a) != len(b) {
		t.Fatalf("the source holds %d records through %d, the clone %d", len(a), head, len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("record %d of %d differs", i, len(a))
		}
	}
}

// checkCompacted: fsck --remote is clean (its segments agree, seq by
// seq), and a clone of ws holds the source's records byte for byte and
// its head's state exactly, reading fewer than maxGets segments.
func checkCompacted(t *testing.T, b objstore.Backend, s *source, ws string, maxGets int64) *journal.Journal {
	t.Helper()
	ctx := context.Background()
	rep, err := Fsck(ctx, b, ws)
	if err != nil || rep.Damaged() {
		t.Fatalf("fsck --remote: %v, %v", rep, err)
	}
	g := &segGets{Backend: b}
	dir := filepath.Join(t.TempDir(), "clone")
	if _, err := Clone(ctx, g, ws, dir, ""); err != nil {
		t.Fatal(err)
	}
	if n := g.n.Load(); n >= maxGets {
		t.Errorf("the clone GETs %d segments, want fewer than %d", n, maxGets)
	}
	cj := openClone(t, dir)
	sameRecords(t, s.j, cj, s.j.Head())
	checkClone(t, s.j, nil, cj, s.j.Head())
	return cj
}

// TestCompactPushes: 300 pushes of a few records each leave at most 20
// segments in the tiling, the clone GETs fewer than 300/8 segments and
// is exact, and every merged segment holds exactly the records of those
// it replaces (fsck --remote's agreement check, the originals still
// being there); on file:// too, with fewer pushes.
func TestCompactPushes(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
		gets int64 // the clone's segment GETs: fewer than this
	}{{"fake", 300, 300 / 8}, {"dir", 60, 20}} {
		t.Run(c.name, func(t *testing.T) {
			b := backends(t)[c.name](t)
			s := newSource(t)
			compacted := 0
			for i := range c.n {
				compacted += onePush(t, s, b, "w", i).Compacted
			}
			keys := tiling(t, b, "w")
			if len(keys) > 20 || compacted == 0 {
				t.Fatalf("%d pushes: %d segments in the tiling, %d merges", c.n, len(keys), compacted)
			}
			t.Logf("%d pushes: %d merges, %d segments in the tiling", c.n, compacted, len(keys))
			checkCompacted(t, b, s, "w", c.gets)
		})
	}
}

// failMerge makes the next PUT of a segment that follows a HEAD write
// (a merge: a push writes its segments before their HEAD) fail.
func failMerge(fake *objstorefake.Backend) *atomic.Bool {
	var afterHead, failed atomic.Bool
	fake.SetHook(func(op objstorefake.Op, key string) error {
		switch {
		case op == objstorefake.OpPutIfMatch && strings.HasSuffix(key, "/HEAD"):
			afterHead.Store(true)
		case op == objstorefake.OpPut && strings.Contains(key, "/seg/") && afterHead.Load() && !failed.Load():
			failed.Store(true)
			return objstorefake.ErrInjected
		case op == objstorefake.OpPut:
			afterHead.Store(false)
		}
		return nil
	})
	return &failed
}

// TestCompactCutOff: a merge whose PUT fails fails the push (after its
// HEAD: the records are shipped), leaves a remote every reader reads
// exactly, and the next push merges.
func TestCompactCutOff(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("cut")
	s := newSource(t)
	i := 0
	for ; i < 15; i++ {
		if res := onePush(t, s, fake, "w", i); res.Compacted != 0 {
			t.Fatalf("push %d merged (%d) before 16 segments", i, res.Compacted)
		}
	}
	failed := failMerge(fake)
	s.write(t, "cut.txt", []byte("cut\n"))
	s.sync(t)
	// The records are shipped: the push succeeds and says why merging
	// stopped.
	res, err := PushWith(ctx, s.j, fake, "w", Options{})
	if err != nil || !failed.Load() || !strings.Contains(res.CompactError, "compact seqs") || !strings.Contains(res.CompactError, objstorefake.ErrInjected.Error()) {
		t.Fatalf("push with the merge's PUT failing: %+v, %v (failed: %v)", res, err, failed.Load())
	}
	fake.SetHook(nil)
	if h, _, err := ReadHead(ctx, fake, "w"); err != nil || h.Seq != s.j.Head() {
		t.Fatalf("HEAD after the cut-off merge: %+v, %v; head %d", h, err, s.j.Head())
	}
	if n := len(tiling(t, fake, "w")); n != 16 {
		t.Fatalf("%d segments in the tiling after the failed merge, want 16", n)
	}
	checkCompacted(t, fake, s, "w", 18)
	if res := onePush(t, s, fake, "w", i); res.Compacted == 0 {
		t.Fatalf("the push after the cut-off merged nothing: %+v", res)
	}
	if n := len(tiling(t, fake, "w")); n > 3 {
		t.Fatalf("%d segments in the tiling after the next push", n)
	}
	checkCompacted(t, fake, s, "w", 4)
}

// TestCompactGC: gc condemns the segments a merge superseded (no reader
// reads them) and deletes them after the grace; fsck --remote is clean
// and a clone exact after the deletion.
func TestCompactGC(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("gc")
	clk := newClock(fake)
	s := newSource(t)
	merged := 0
	for i := range 40 {
		merged += onePush(t, s, fake, "w", i).Compacted
	}
	live := tiling(t, fake, "w")
	var all []string
	for _, k := range fake.Keys() {
		if strings.Contains(k, "/seg/") {
			all = append(all, k)
		}
	}
	if merged == 0 || len(all) <= len(live) {
		t.Fatalf("%d merges, %d segments, %d in the tiling", merged, len(all), len(live))
	}
	superseded := len(all) - len(live)
	clk.add(time.Minute)
	res, err := GC(ctx, fake, GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Condemned.Segments != superseded || res.Deleted.Segments != 0 {
		t.Fatalf("first gc condemned %d segments (deleted %d), %d are superseded", res.Condemned.Segments, res.Deleted.Segments, superseded)
	}
	clk.add(DefaultGrace)
	res, err = GC(ctx, fake, GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted.Segments != superseded {
		t.Fatalf("gc after the grace deleted %d segments, %d are superseded", res.Deleted.Segments, superseded)
	}
	var left []string
	for _, k := range fake.Keys() {
		if strings.Contains(k, "/seg/") {
			left = append(left, k)
		}
	}
	if fmt.Sprint(left) != fmt.Sprint(live) {
		t.Fatalf("segments left after gc:\n%v\nthe tiling was:\n%v", left, live)
	}
	checkCompacted(t, fake, s, "w", int64(len(live)+1))
}

// mergedKey returns a segment of ws's tiling that covers more than
// min seqs (a merge's), with its range.
func mergedKey(t *testing.T, b objstore.Backend, ws string, min uint64) (string, uint64, uint64) {
	t.Helper()
	for _, k := range tiling(t, b, ws) {
		if _, first, last, ok := ParseSegmentKey(ws, k); ok && last-first >= min {
			return k, first, last
		}
	}
	t.Fatalf("no segment of %s's tiling covers %d seqs", ws, min)
	return "", 0, 0
}

// TestCompactFork: a fork at a seq inside a merged segment reads it
// (coverPast: its records past the fork's seq are left out); a clone of
// the fork is the parent's state at that seq, record for record.
func TestCompactFork(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("fork")
	s := newSource(t)
	for i := range 20 {
		onePush(t, s, fake, "w", i)
	}
	key, first, last := mergedKey(t, fake, "w", 20)
	at := (first + last) / 2
	if _, err := Fork(ctx, fake, "w", at, "f"); err != nil {
		t.Fatal(err)
	}
	g := &segGets{Backend: fake}
	dir := filepath.Join(t.TempDir(), "fork")
	res, err := Clone(ctx, g, "f", dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Head != at || g.n.Load() != 1 {
		t.Fatalf("clone of the fork at %d (inside %s): %+v, %d segment GETs", at, key, res, g.n.Load())
	}
	cj := openClone(t, dir)
	sameRecords(t, s.j, cj, at)
	if cj.Head() != at {
		t.Fatalf("fork clone's head %d, want %d", cj.Head(), at)
	}
	checkClone(t, s.j, nil, cj, at)
	if rep, err := Fsck(ctx, fake, ""); err != nil || rep.Damaged() {
		t.Fatalf("fsck --remote: %v, %v", rep, err)
	}
}

// TestCompactFetchMid: a clone made before the merges fetches from a
// seq inside a merged segment: first with the originals there, then,
// after gc deleted them, from the merged segment alone (which starts
// before the seq the fetch starts at).
func TestCompactFetchMid(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("fetch")
	clk := newClock(fake)
	s := newSource(t)
	for i := range 5 {
		onePush(t, s, fake, "w", i)
	}
	var clones []*journal.Journal
	for i := range 2 {
		dir := filepath.Join(t.TempDir(), fmt.Sprint("clone", i))
		if _, err := Clone(ctx, fake, "w", dir, ""); err != nil {
			t.Fatal(err)
		}
		clones = append(clones, openClone(t, dir))
	}
	got := clones[0].Head()
	for i := 5; i < 40; i++ {
		onePush(t, s, fake, "w", i)
	}
	key, first, last := mergedKey(t, fake, "w", 20)
	if first > got || last <= got {
		t.Fatalf("the merged segment %s does not hold the clone's seq %d", key, got)
	}
	live := tiling(t, fake, "w") // what gc keeps
	fetch := func(cj *journal.Journal) {
		t.Helper()
		var read []string
		fake.SetHook(func(op objstorefake.Op, key string) error {
			if op == objstorefake.OpGet && strings.Contains(key, "/seg/") {
				read = append(read, key)
			}
			return nil
		})
		res, err := Fetch(ctx, cj, fake, "w")
		fake.SetHook(nil)
		if err != nil || res.From != got+1 || res.Through != s.j.Head() {
			t.Fatalf("fetch from %d: %+v, %v", got, res, err)
		}
		// It reads the merged segment across its first seq and the
		// tiling after it, as a reader from seq 1 does: no segment gc
		// may have condemned.
		if len(read) == 0 || read[0] != key || !slices.Contains(live, read[len(read)-1]) || len(read) > len(live) {
			t.Fatalf("fetch from %d read %v; the tiling is %v", got, read, live)
		}
		for _, k := range read {
			if !slices.Contains(live, k) {
				t.Fatalf("fetch from %d read %s, which is not in the tiling %v", got, k, live)
			}
		}
		sameRecords(t, s.j, cj, s.j.Head())
		checkClone(t, s.j, nil, cj, s.j.Head())
	}
	fetch(clones[0])
	clk.add(time.Minute)
	if _, err := GC(ctx, fake, GCOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.add(DefaultGrace)
	if res, err := GC(ctx, fake, GCOptions{}); err != nil || res.Deleted.Segments == 0 {
		t.Fatalf("gc: %+v, %v", res, err)
	}
	for _, k := range fake.Keys() {
		if _, f, _, ok := ParseSegmentKey("w", k); ok && f == got+1 {
			t.Fatalf("%s still starts at the fetch's seq", k)
		}
	}
	fetch(clones[1])
}

// TestCompactPlan: a merge never crosses an epoch, never reaches past
// HEAD nor below a fork's seq, takes the lowest level first and keeps
// under the size cap.
func TestCompactPlan(t *testing.T) {
	c := &compactor{segs: map[string]cseg{}}
	add := func(e, first, last uint64, size int64) {
		k := SegmentKey("w", e, first, last)
		c.segs[k] = cseg{seg: seg{key: k, first: first, last: last}, epoch: e, size: size}
	}
	// Epoch 1: seqs 1-20, epoch 2 from 21: 30 small segments.
	for q := uint64(1); q <= 30; q++ {
		add(map[bool]uint64{true: 1, false: 2}[q <= 20], q, q, 200)
	}
	h := &Head{Seq: 30, Epochs: []Epoch{{Epoch: 1, First: 1}, {Epoch: 2, First: 21}}}
	g := c.plan(h, 16)
	if len(g) != 16 || g[0].first != 1 || g[15].last != 16 {
		t.Fatalf("plan: %v", g)
	}
	h.Epochs[1].First = 10 // epoch 1 holds 9 segments, epoch 2 from 10
	for q := uint64(10); q <= 20; q++ {
		delete(c.segs, SegmentKey("w", 1, q, q))
		add(2, q, q, 200)
	}
	if g := c.plan(h, 16); len(g) != 16 || g[0].first != 10 || g[0].epoch != 2 || g[15].last != 25 {
		t.Fatalf("plan across an epoch: %v", g)
	}
	h.Seq = 24 // HEAD before the 16th segment of epoch 2
	if g := c.plan(h, 16); g != nil {
		t.Fatalf("plan past HEAD: %v", g)
	}
	h.Seq, h.Parent = 30, &Parent{WS: "p", Seq: 16} // 14 segments after it
	if g := c.plan(h, 16); g != nil {
		t.Fatalf("plan below the fork's seq: %v", g)
	}
	h.Parent = nil
	// Level 1 segments before 16 small ones: the small ones first.
	c.segs = map[string]cseg{}
	for q := uint64(1); q <= 16; q++ {
		add(1, q, q, compactBase)
	}
	for q := uint64(17); q <= 32; q++ {
		add(1, q, q, 100)
	}
	h = &Head{Seq: 32, Epochs: []Epoch{{Epoch: 1, First: 1}}}
	if g := c.plan(h, 16); len(g) != 16 || g[0].first != 17 {
		t.Fatalf("plan by level: %v", g)
	}
	// Big segments: a merge past the cap is not planned.
	c.segs = map[string]cseg{}
	for q := uint64(1); q <= 16; q++ {
		add(1, q, q, compactMax/8)
	}
	h.Seq = 16
	if g := c.plan(h, 16); g != nil {
		t.Fatalf("plan past the cap: %v", g)
	}
}

// TestCompactShipRounds: a Shipper's rounds merge (one merge a round,
// after HEAD); a merge that fails does not fail the round (shipping goes
// on) and stops merging for the session; the next session merges again.
func TestCompactShipRounds(t *testing.T) {
	fake := objstorefake.New("ship")
	s := newSource(t)
	d := newShipDriver(t, s, fake, "w")
	i := 0
	for ; i < 15; i++ {
		d.round(t, s, i)
	}
	failed := failMerge(fake)
	for ; i < 40; i++ {
		d.round(t, s, i)
	}
	fake.SetHook(nil)
	if h, _, err := ReadHead(context.Background(), fake, "w"); err != nil || h.Seq != s.j.Head() || !failed.Load() {
		t.Fatalf("HEAD %+v, %v; head %d; the merge failed: %v", h, err, s.j.Head(), failed.Load())
	}
	if n := len(tiling(t, fake, "w")); n != 40 || !d.p.noCompact {
		t.Fatalf("%d segments in the tiling after a session whose first merge failed, want 40 (merging off: %v)", n, d.p.noCompact)
	}
	d.close()
	d.open(t)
	for ; i < 300; i++ {
		d.round(t, s, i)
	}
	if n := len(tiling(t, fake, "w")); n > 20 {
		t.Fatalf("%d segments in the tiling after 300 rounds", n)
	}
	checkCompacted(t, fake, s, "w", 300/8)
}

// TestCompactTakeover: after a takeover, the taker's pushes merge its
// epoch's segments and never one across the epochs (no key on the
// remote spans the boundary); a clone is the taker's history exactly.
func TestCompactTakeover(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("take")
	a := newSource(t)
	for i := range 10 {
		onePush(t, a, fake, "w", i)
	}
	dir := filepath.Join(t.TempDir(), "db")
	res, err := Take(ctx, fake, "w", dir, TakeOptions{Poll: 100 * time.Millisecond})
	if err != nil || res.Epoch != 2 {
		t.Fatalf("take: %+v, %v", res, err)
	}
	c := reopen(t, dir)
	merged := 0
	for i := 10; i < 40; i++ {
		merged += onePush(t, c, fake, "w", i).Compacted
	}
	h, _, err := ReadHead(ctx, fake, "w")
	if err != nil || len(h.Epochs) != 2 || merged == 0 {
		t.Fatalf("HEAD %+v, %v after %d merges", h, err, merged)
	}
	cut := h.Epochs[1].First
	for _, k := range fake.Keys() {
		if e, first, last, ok := ParseSegmentKey("w", k); ok && first < cut && last >= cut {
			t.Errorf("%s (epoch %d) spans the takeover at seq %d", k, e, cut)
		}
	}
	if n := len(tiling(t, fake, "w")); n > 10+16 {
		t.Fatalf("%d segments in the tiling", n)
	}
	checkCompacted(t, fake, c, "w", 10+16)
}

// TestCompactFromRemote: a merge whose range starts below the store's
// floor (records it dropped after pushing them) is made from the
// remote's segments (GETs), and is exact.
func TestCompactFromRemote(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("remote")
	s := newSource(t)
	off := Options{CompactK: -1}
	for i := range 20 {
		s.write(t, fmt.Sprintf("f%d.txt", i%7), []byte(fmt.Sprintf("round %d\n", i)))
		g := uint64(0)
		if i == 3 {
			g = s.cut(t, "g") // pushed with the write before it
		}
		s.sync(t)
		res, err := PushWith(ctx, s.j, fake, "w", off)
		if err != nil || res.Compacted != 0 {
			t.Fatalf("push %d: %+v, %v", i, res, err)
		}
		if g != 0 {
			if _, err := s.j.Truncate(g); err != nil {
				t.Fatal(err)
			}
		}
	}
	floor, err := s.j.Floor()
	if err != nil || floor <= 1 {
		t.Fatalf("floor %d, %v", floor, err)
	}
	var gets atomic.Int64
	fake.SetHook(func(op objstorefake.Op, key string) error {
		if op == objstorefake.OpGet && strings.Contains(key, "/seg/") {
			gets.Add(1)
		}
		return nil
	})
	res := onePush(t, s, fake, "w", 20)
	fake.SetHook(nil)
	if res.Compacted == 0 || gets.Load() < DefaultCompactK {
		t.Fatalf("push below the floor %d: %+v, %d segment GETs", floor, res, gets.Load())
	}
	key, first, _ := mergedKey(t, fake, "w", 10)
	if first >= floor {
		t.Fatalf("the merged segment %s starts at or above the floor %d", key, floor)
	}
	checkCompacted(t, fake, s, "w", 10)
}

// TestCompactOrder: over 40 pushes, invariants 1-3 hold (checkOrder),
// and every merged segment (its range already covered by segments
// written before it) is written after a HEAD covering its last seq.
func TestCompactOrder(t *testing.T) {
	s := newSource(t)
	rec := &recorder{Backend: objstorefake.New("order")}
	merged := 0
	for i := range 40 {
		merged += onePush(t, s, rec, "w", i).Compacted
	}
	log := rec.requests()
	checkOrder(t, s.j.Objects(), "w", log)
	var segs []seg
	head, merges := uint64(0), 0
	for i, q := range log {
		switch {
		case q.key == HeadKey("w") && strings.HasPrefix(q.op, "putif"):
			h, err := DecodeHead(q.key, q.data)
			if err != nil {
				t.Fatal(err)
			}
			head = h.Seq
		case q.op == "put" && strings.HasPrefix(q.key, segPrefix("w")):
			_, first, last, _ := ParseSegmentKey("w", q.key)
			if cover(segs, first, last) != nil {
				merges++
				if last > head {
					t.Errorf("request %d: merged segment %s written when HEAD covered only %d", i, q.key, head)
				}
			}
			segs = append(segs, seg{key: q.key, first: first, last: last})
		}
	}
	if merges != merged || merged == 0 {
		t.Fatalf("%d merged segments in the log, the pushes say %d", merges, merged)
	}
}
