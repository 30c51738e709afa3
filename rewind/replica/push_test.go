package replica

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
	"github.com/reynfs/reynfs/journal"
)

// reached is every object r reaches in store s: what a remote must hold
// before a segment with r is written.
func reached(t *testing.T, s cas.Store, r *journal.Record) []cas.Hash {
	t.Helper()
	var out []cas.Hash
	var roots []cas.Hash
	switch r.Op {
	case journal.OpData:
		for _, c := range r.Chunks {
			if !c.Hash.IsZero() {
				out = append(out, c.Hash)
			}
		}
	case journal.OpGeneration:
		roots = append(roots, r.Root)
		for _, a := range r.Agents {
			out = append(out, a.State)
		}
	case journal.OpImport, journal.OpRestore:
		roots = append(roots, r.Root)
	case journal.OpAgentState:
		out = append(out, r.Root)
	}
	err := cas.Walk(s, roots, func(h cas.Hash, _ *cas.Inode) error {
		out = append(out, h)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkOrder checks the ordering invariants 1-3 on a request log: a
// pack before its index, every object a segment's records reach in an
// index written before the segment, the segments a HEAD covers written
// before it, and HEAD written only by PutIfAbsent and PutIfMatch.
func checkOrder(t *testing.T, objs cas.Store, ws string, log []request) {
	t.Helper()
	packs := map[string]bool{}
	indexed := map[cas.Hash]bool{}
	var segs []seg
	heads := 0
	for i, q := range log {
		switch {
		case q.op == "put" && strings.HasSuffix(q.key, ".pack"):
			packs[strings.TrimSuffix(strings.TrimPrefix(q.key, "packs/"), ".pack")] = true
		case q.op == "put" && strings.HasSuffix(q.key, ".idx"):
			id := strings.TrimSuffix(strings.TrimPrefix(q.key, "packs/"), ".idx")
			if !packs[id] {
				t.Errorf("request %d: index %s written before its pack", i, q.key)
			}
			x, err := DecodeIndex(q.key, q.data)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range x.Entries {
				indexed[e.Hash] = true
			}
		case q.op == "put" && strings.HasPrefix(q.key, segPrefix(ws)):
			s, err := DecodeSegment(ws, q.key, q.data)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range s.Records {
				for _, h := range reached(t, objs, r) {
					if !indexed[h] {
						t.Errorf("request %d: segment %s written before an index names object %s of seq %d", i, q.key, h.Short(), r.Seq)
					}
				}
			}
			segs = append(segs, seg{key: q.key, first: s.First, last: s.Last})
		case q.key == HeadKey(ws):
			if q.op == "put" || q.op == "putifabsent" && heads > 0 {
				t.Errorf("request %d: HEAD written by %s", i, q.op)
			}
			if q.op != "putifabsent" && q.op != "putifmatch" {
				continue
			}
			heads++
			h, err := DecodeHead(q.key, q.data)
			if err != nil {
				t.Fatal(err)
			}
			if h.Seq > 0 && cover(segs, 1, h.Seq) == nil {
				t.Errorf("request %d: HEAD at seq %d written before segments covering it", i, h.Seq)
			}
		}
	}
	if len(segs) < 2 || len(packs) < 3 {
		t.Fatalf("the push wrote %d segments and %d packs: too few to check an order", len(segs), len(packs))
	}
}

// TestPushOrder: invariants 1-3 hold over a push in many small packs and
// segments, and the lease is timed by the server's clock.
func TestPushOrder(t *testing.T) {
	ctx := context.Background()
	s := newSource(t)
	history(t, s)
	fake := objstorefake.New("order")
	server := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	fake.SetClock(func() time.Time { return server })
	rec := &recorder{Backend: fake}
	o := Options{PackSize: 16 << 10, SegmentSize: 200, TTL: 30 * time.Second}
	res, err := PushWith(ctx, s.j, rec, "w", o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Through != s.j.Head() || res.From != 1 {
		t.Fatalf("pushed %d-%d, want 1-%d", res.From, res.Through, s.j.Head())
	}
	log := rec.requests()
	checkOrder(t, s.j.Objects(), "w", log)
	var expiries []time.Time
	for _, q := range log {
		if q.key == HeadKey("w") && strings.HasPrefix(q.op, "putif") {
			h, err := DecodeHead(q.key, q.data)
			if err != nil {
				t.Fatal(err)
			}
			expiries = append(expiries, h.Expires)
		}
	}
	if !expiries[0].Equal(server.Add(30*time.Second)) || !expiries[len(expiries)-1].Equal(server) {
		t.Errorf("lease expiries %v: want the server's time + TTL while pushing, the server's time after", expiries)
	}
}

// TestPushLosesRace: a push whose HEAD was taken over meanwhile (epoch
// 2) stops with ErrDeposed and leaves the new holder's HEAD alone.
func TestPushLosesRace(t *testing.T) {
	ctx := context.Background()
	s := newSource(t)
	s.write(t, "a", []byte("a"))
	s.cut(t, "one")
	fake := objstorefake.New("race")
	if _, err := Push(ctx, s.j, fake, "w"); err != nil {
		t.Fatal(err)
	}
	s.write(t, "b", []byte("b"))
	s.cut(t, "two")
	var taker []byte
	rec := &recorder{Backend: fake}
	rec.before = func(op, key string) {
		if op != "put" || !strings.HasPrefix(key, segPrefix("w")) || taker != nil {
			return
		}
		data, info, err := fake.Get(ctx, HeadKey("w"))
		if err != nil {
			t.Error(err)
			return
		}
		h, err := DecodeHead(HeadKey("w"), data)
		if err != nil {
			t.Error(err)
			return
		}
		h.Epochs = append(h.Epochs, Epoch{Epoch: 2, First: h.Seq + 1})
		h.Holder = Holder{Host: "elsewhere", Pid: 1, Store: h.Holder.Store}
		taker = h.Encode()
		if _, err := fake.PutIfMatch(ctx, HeadKey("w"), taker, info.ETag); err != nil {
			t.Error(err)
		}
	}
	_, err := Push(ctx, s.j, rec, "w")
	if !errors.Is(err, ErrDeposed) {
		t.Fatalf("push after a takeover = %v, want ErrDeposed", err)
	}
	if data, _, err := fake.Get(ctx, HeadKey("w")); err != nil || string(data) != string(taker) {
		t.Fatalf("HEAD after the deposed push: %s, %v; want the taker's", data, err)
	}
}

// TestPushRefusesOthers: a workspace pushed by another store, or held by
// an unexpired lease of another host, is refused with a clear error.
func TestPushRefusesOthers(t *testing.T) {
	ctx := context.Background()
	a, b := newSource(t), newSource(t)
	a.write(t, "x", []byte("x"))
	fake := objstorefake.New("others")
	if _, err := Push(ctx, a.j, fake, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := Push(ctx, b.j, fake, "w"); !errors.Is(err, ErrNotOurs) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("push of another store = %v, want ErrNotOurs on one line", err)
	}
	data, info, err := fake.Get(ctx, HeadKey("w"))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := DecodeHead(HeadKey("w"), data)
	h.Holder.Host, h.Expires = "elsewhere", time.Now().Add(time.Hour).UTC().Round(0)
	if _, err := fake.PutIfMatch(ctx, HeadKey("w"), h.Encode(), info.ETag); err != nil {
		t.Fatal(err)
	}
	if _, err := Push(ctx, a.j, fake, "w"); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "elsewhere") {
		t.Fatalf("push under another host's lease = %v, want ErrLocked naming it", err)
	}
	if _, err := Push(ctx, a.j, fake, "bad/name"); !errors.Is(err, ErrName) {
		t.Fatalf("push to workspace bad/name = %v, want ErrName", err)
	}
}

// TestSecondPushSendsOnlyChanges: after a push, a push of one changed
// file sends its chunk and the inode objects on its path, and asks the
// server nothing per object; a push with nothing new writes nothing but
// the lease.
func TestSecondPushSendsOnlyChanges(t *testing.T) {
	ctx := context.Background()
	s := newSource(t)
	for d := range 10 {
		s.mkdir(t, fmt.Sprintf("d%d", d))
		for f := range 20 {
			s.write(t, fmt.Sprintf("d%d/f%d", d, f), pattern(byte(d*20+f), 3000))
		}
	}
	s.cut(t, "many")
	fake := objstorefake.New("incr")
	first, err := Push(ctx, s.j, fake, "w")
	if err != nil {
		t.Fatal(err)
	}
	if first.Objects < 200 {
		t.Fatalf("first push sent %d objects, want every file", first.Objects)
	}
	s.write(t, "d3/f7", []byte("changed"))
	s.cut(t, "one change")
	fake.Reset()
	res, err := Push(ctx, s.j, fake, "w")
	if err != nil {
		t.Fatal(err)
	}
	st := fake.Stats()
	// Root, d3 and f7's inode objects (the generation's tree and the
	// records' replay states) and one chunk.
	if res.Objects > 6 {
		t.Errorf("second push sent %d objects, want the changed path only", res.Objects)
	}
	q := st.Requests
	if q[objstorefake.OpGet] != 2 || q[objstorefake.OpStat]+q[objstorefake.OpGetRange] != 0 || q[objstorefake.OpList] != 2 ||
		q[objstorefake.OpPut] > 5 || q[objstorefake.OpPutIfMatch] != 3 {
		t.Errorf("second push requests %v: want 2 GETs (config, HEAD), two Lists (gc/, remote GC's lists; the workspace's segments, compact.go), no Stat or GetRange, at most 5 PUTs, 3 CAS", q)
	}
	fake.Reset()
	if res, err := Push(ctx, s.j, fake, "w"); err != nil || res.Segments != 0 {
		t.Fatalf("third push: %+v, %v", res, err)
	}
	if n := fake.Count(objstorefake.OpPut); n != 0 {
		t.Errorf("a push with nothing new made %d PUTs", n)
	}
	dir := filepath.Join(t.TempDir(), "db")
	if _, err := Clone(ctx, fake, "w", dir, ""); err != nil {
		t.Fatal(err)
	}
	checkClone(t, s.j, map[string]uint64{"head": s.j.Head()}, openClone(t, dir), s.j.Head())
}

// TestPushDroppedBeforeHead: a push cut off after its packs and segment
// and before HEAD leaves the remote at the old HEAD: a clone gets the
// old state exactly and ignores the segment no HEAD covers (invariants 2
// and 4); the next push completes it.
func TestPushDroppedBeforeHead(t *testing.T) {
	ctx := context.Background()
	s := newSource(t)
	at := history(t, s)
	fake := objstorefake.New("dropped")
	if _, err := PushWith(ctx, s.j, fake, "w", Options{}); err != nil {
		t.Fatal(err)
	}
	old := s.j.Head()
	s.write(t, "later.txt", []byte("after the first push\n"))
	s.write(t, "src/deep/big.bin", pattern(9, 2*cas.ChunkSize))
	s.cut(t, "later")
	fake.FailNth(objstorefake.OpPutIfMatch, 2, nil) // 1: the lease; 2: HEAD
	if _, err := Push(ctx, s.j, fake, "w"); !errors.Is(err, objstorefake.ErrInjected) {
		t.Fatalf("push with HEAD's write failing = %v", err)
	}
	stray := false
	for _, k := range fake.Keys() {
		if e, first, last, ok := ParseSegmentKey("w", k); ok && e == 1 && first == old+1 && last == s.j.Head() {
			stray = true
		}
	}
	if !stray {
		t.Fatalf("the failed push wrote no segment of seqs %d-%d", old+1, s.j.Head())
	}
	// A reader must not even read a segment past HEAD: make one garbage.
	if err := fake.Put(ctx, SegmentKey("w", 1, old+1, old+1), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Backend: fake}
	dir := filepath.Join(t.TempDir(), "db")
	res, err := Clone(ctx, rec, "w", dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Head != old || res.Target != old {
		t.Fatalf("clone after the cut-off push: head %d target %d, want %d", res.Head, res.Target, old)
	}
	log := rec.requests()
	if len(log) < 2 || log[0].key != ConfigKey || log[1].op != "get" || log[1].key != HeadKey("w") {
		t.Errorf("clone's first requests %v: want the config, then HEAD", log[:min(2, len(log))])
	}
	packGets := map[string]int{}
	for _, q := range log {
		if _, first, _, ok := ParseSegmentKey("w", q.key); ok && first > old {
			t.Errorf("clone read %s, which HEAD (seq %d) does not cover", q.key, old)
		}
		if q.op == "get" && strings.HasSuffix(q.key, ".pack") {
			if packGets[q.key]++; packGets[q.key] == 2 {
				t.Errorf("clone read %s more than once", q.key)
			}
		}
	}
	at["head"] = old
	checkClone(t, s.j, at, openClone(t, dir), old)

	if _, err := Push(ctx, s.j, fake, "w"); err != nil {
		t.Fatal(err)
	}
	dir2 := filepath.Join(t.TempDir(), "db")
	if _, err := Clone(ctx, fake, "w", dir2, ""); err != nil {
		t.Fatal(err)
	}
	at["head"] = s.j.Head()
	checkClone(t, s.j, at, openClone(t, dir2), s.j.Head())
}

// TestPushResumes: a connection dropped after a write applied (a pack;
// HEAD's advance) fails the push; the next push from the same store
// takes the lease back, finishes, and the clone is exact.
func TestPushResumes(t *testing.T) {
	for _, c := range []struct {
		name string
		op   objstorefake.Op
		n    int
		o    Options
	}{{"first-pack", objstorefake.OpPut, 1, Options{}}, {"head", objstorefake.OpPutIfMatch, 2, Options{}},
		{"third-put", objstorefake.OpPut, 3, Options{}}, {"later-put", objstorefake.OpPut, 9, Options{}},
		// One segment of many packs, cut off at its third pack: the
		// objects of the first two are not sent again.
		{"inside-segment", objstorefake.OpPut, 5, Options{SegmentSize: 1 << 20, PackSize: 4000}}} {
		if c.o.SegmentSize == 0 {
			c.o.SegmentSize = 300
		}
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := newSource(t)
			at := history(t, s)
			other := objstorefake.New("whole")
			if _, err := PushWith(ctx, s.j, other, "w", c.o); err != nil {
				t.Fatal(err)
			}
			whole := other.Stats().BytesIn
			fake := objstorefake.New(c.name)
			fake.DropAfterWrite(c.op, c.n)
			var lastPut string
			fake.SetHook(func(op objstorefake.Op, key string) error {
				if op == objstorefake.OpPut {
					lastPut = key
				}
				return nil
			})
			if _, err := PushWith(ctx, s.j, fake, "w", c.o); !errors.Is(err, objstorefake.ErrDropped) {
				t.Fatalf("push with a dropped %s = %v", c.op, err)
			}
			before, had := map[string]bool{}, map[cas.Hash]bool{}
			// The pack whose index's write lost its reply is sent again
			// (in a new pack: packs are salted).
			lostIdx := strings.TrimSuffix(strings.TrimSuffix(lastPut, ".idx"), ".pack") + ".idx"
			for k, hs := range indexed(t, fake) {
				before[k] = true
				if k == lostIdx {
					continue
				}
				for h := range hs {
					had[h] = true
				}
			}
			fake.Reset()
			// A pack or index written before the drop is not written
			// again (the same objects make the same pack, so its key
			// would not show it).
			var again []string
			lost := strings.TrimSuffix(lastPut, ".idx") + ".pack" // its write's reply was lost: sent again
			fake.SetHook(func(op objstorefake.Op, key string) error {
				if op == objstorefake.OpPut && before[strings.TrimSuffix(key, ".pack")+".idx"] && key != lost {
					again = append(again, key)
				}
				return nil
			})
			res, err := PushWith(ctx, s.j, fake, "w", c.o)
			fake.SetHook(nil)
			if len(again) > 0 {
				t.Errorf("the resumed push wrote again %v, written before the drop", again)
			}
			if err != nil {
				t.Fatal(err)
			}
			resumed := fake.Stats().BytesIn
			if res.Through != s.j.Head() {
				t.Fatalf("resumed push reached %d, want %d", res.Through, s.j.Head())
			}
			// What an index written before the drop names is not sent
			// again, and the resumed push writes less than a whole push.
			for k, hs := range indexed(t, fake) {
				if before[k] {
					continue
				}
				for h := range hs {
					if had[h] {
						t.Errorf("the resumed push sent %s again (in %s), which an index written before the drop names", h.Short(), k)
					}
				}
			}
			if c.name != "first-pack" && resumed >= whole {
				t.Errorf("the resumed push wrote %d bytes, a whole push %d", resumed, whole)
			}
			dir := filepath.Join(t.TempDir(), "db")
			if _, err := Clone(ctx, fake, "w", dir, ""); err != nil {
				t.Fatal(err)
			}
			checkClone(t, s.j, at, openClone(t, dir), s.j.Head())
		})
	}
}

// TestPushLostReply: a conditional write of HEAD that was applied, whose
// reply was lost and whose retry then failed its condition, is taken for
// the push's own (HEAD holds exactly what it wrote): the push goes on.
func TestPushLostReply(t *testing.T) {
	ctx := context.Background()
	s := newSource(t)
	at := history(t, s)
	fake := objstorefake.New("lost")
	rec := &recorder{Backend: fake}
	rec.lostReply = func(op, key string) bool { return key == HeadKey("w") }
	res, err := PushWith(ctx, s.j, rec, "w", Options{SegmentSize: 300})
	if err != nil {
		t.Fatal(err)
	}
	if res.Through != s.j.Head() || res.Segments < 2 {
		t.Fatalf("push through %d in %d segments, want %d in several", res.Through, res.Segments, s.j.Head())
	}
	data, _, err := fake.Get(ctx, HeadKey("w"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := DecodeHead(HeadKey("w"), data)
	if err != nil || h.Seq != s.j.Head() {
		t.Fatalf("HEAD %+v, %v", h, err)
	}
	dir := filepath.Join(t.TempDir(), "db")
	if _, err := Clone(ctx, fake, "w", dir, ""); err != nil {
		t.Fatal(err)
	}
	checkClone(t, s.j, at, openClone(t, dir), s.j.Head())
}

// indexed returns, for each index file in the fake, the objects it names.
func indexed(t *testing.T, fake *objstorefake.Backend) map[string]map[cas.Hash]bool {
	t.Helper()
	out := map[string]map[cas.Hash]bool{}
	for _, k := range fake.Keys() {
		if !strings.HasSuffix(k, ".idx") {
			continue
		}
		data, _, err := fake.Get(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		x, err := DecodeIndex(k, data)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = map[cas.Hash]bool{}
		for _, e := range x.Entries {
			out[k][e.Hash] = true
		}
	}
	return out
}

var _ objstore.Backend = (*recorder)(nil)
