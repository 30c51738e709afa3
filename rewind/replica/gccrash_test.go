package replica

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
)

// TestGCCrash: a deleting run cut off before each of its deletions (and
// before gc/state is bumped) deletes nothing live: fsck --remote is
// clean and a clone at head exact; the next run finishes, leaving what
// an uncut run leaves.
func TestGCCrash(t *testing.T) {
	ctx := context.Background()
	scene := func(t *testing.T) (*gcScene, *objstorefake.Backend) {
		fake := objstorefake.New(t.Name())
		clk := newClock(fake)
		g := newGCScene(t, fake, true)
		clk.add(DefaultGrace)
		return g, fake
	}
	_, ref := scene(t)
	deletes := ref.Count(objstorefake.OpDelete)
	if res := mustGC(t, ref); res.Deleted.Packs == 0 {
		t.Fatalf("reference run: %+v", res)
	}
	deletes = ref.Count(objstorefake.OpDelete) - deletes
	if deletes < 4 {
		t.Fatalf("the reference run made %d deletions", deletes)
	}
	cut := func(t *testing.T, fail func(*objstorefake.Backend)) {
		g, fake := scene(t)
		// What an uncut run leaves: all but what the list names, and
		// the list; plus gc/state.
		lists, err := readCondemned(ctx, fake)
		if err != nil || len(lists) != 1 {
			t.Fatalf("lists: %v, %v", lists, err)
		}
		gone := map[string]bool{lists[0].key: true}
		for _, id := range lists[0].c.Packs {
			gone[PackKey(id)], gone[IndexKey(id)] = true, true
		}
		for _, k := range lists[0].c.Segments {
			gone[k] = true
		}
		want := []string{gcStateKey}
		for _, k := range allKeys(t, fake) {
			if !gone[k] {
				want = append(want, k)
			}
		}
		slices.Sort(want)
		fail(fake)
		if _, err := GC(ctx, fake, GCOptions{}); !errors.Is(err, objstorefake.ErrInjected) {
			t.Fatalf("cut run: %v", err)
		}
		checkRemote(t, fake, g.s, "w", g.at)
		res := mustGC(t, fake)
		if len(res.Removed) != 1 {
			t.Errorf("the next run: %+v", res)
		}
		got := allKeys(t, fake)
		if !slices.Equal(got, want) {
			t.Errorf("after the next run:\n%v\nwant\n%v", got, want)
		}
		checkRemote(t, fake, g.s, "w", g.at)
	}
	t.Run("bump", func(t *testing.T) {
		cut(t, func(f *objstorefake.Backend) { f.FailNth(objstorefake.OpPutIfAbsent, 1, nil) })
	})
	for n := 1; n <= deletes; n++ {
		t.Run("delete"+string(rune('0'+n)), func(t *testing.T) {
			cut(t, func(f *objstorefake.Backend) { f.FailNth(objstorefake.OpDelete, n, nil) })
		})
	}
}

// TestGCRefusesDamage: a mark that meets a damaged segment is an error
// and the run deletes nothing (a list past its grace stays).
func TestGCRefusesDamage(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New(t.Name())
	clk := newClock(fake)
	newGCScene(t, fake, true)
	clk.add(DefaultGrace)
	h, _, err := ReadHead(ctx, fake, "w")
	if err != nil {
		t.Fatal(err)
	}
	rd := &segReader{ctx: ctx, b: fake}
	if _, err := rd.records("w", h, 1, h.Seq, 0); err != nil || len(rd.keys) == 0 {
		t.Fatalf("read w: %v", err)
	}
	data, _, err := fake.Get(ctx, rd.keys[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if err := fake.Put(ctx, rd.keys[0], data); err != nil {
		t.Fatal(err)
	}
	before := allKeys(t, fake)
	if _, err := GC(ctx, fake, GCOptions{}); !errors.Is(err, ErrCorrupt) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("gc of a damaged remote: %v", err)
	}
	if after := allKeys(t, fake); !slices.Equal(before, after) {
		t.Fatalf("gc of a damaged remote changed it:\n%v\n%v", before, after)
	}
}
