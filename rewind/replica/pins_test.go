package replica

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
)

// TestLazyPinKeepsPacks: a lazy clone of g1 (a.bin live, its chunks left
// on the remote); the writer then deletes a.bin and forgets up to g2, so
// nothing on the remote reaches a.bin's chunks. Two gc runs a grace
// apart keep their pack because the clone pinned it, and the clone
// still reads a.bin. Once the clone has fetched everything its pin is
// gone, and the next two runs delete the pack.
func TestLazyPinKeepsPacks(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("pin")
	clk := newClock(fake)
	f := &lazyFixture{fake: fake}
	g := newGCSceneWith(t, fake, false, func(g *gcScene) {
		f.dir = filepath.Join(t.TempDir(), "clone")
		res, err := CloneLazy(ctx, fake, "w", f.dir, strconv.FormatUint(g.at["g1"], 10))
		if err != nil {
			t.Fatal(err)
		}
		if res.PinnedPacks == 0 || res.PinError != "" {
			t.Fatalf("lazy clone: %+v; want its data packs pinned", res)
		}
	})
	pins, err := readPins(ctx, fake)
	if err != nil || len(pins) != 1 || pins[0].WS != "w" || len(pins[0].Packs) == 0 {
		t.Fatalf("pins after the lazy clone: %+v, %v", pins, err)
	}
	want := pattern(1, 200000)
	collect := func(what string) *GCResult {
		t.Helper()
		clk.add(time.Minute)
		if _, err := GC(ctx, fake, GCOptions{}); err != nil {
			t.Fatal(err)
		}
		clk.add(DefaultGrace + time.Minute)
		res, err := GC(ctx, fake, GCOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v", what, res)
		return res
	}
	res := collect("gc with the pin")
	if res.Pins != 1 || res.PinnedPacks == 0 {
		t.Fatalf("gc with a pinned lazy clone: %+v; want the pinned packs kept", res)
	}
	// (A tree pack only g1 reached may go: the clone holds every inode
	// object.)
	for _, id := range pins[0].Packs {
		if _, err := fake.Stat(ctx, PackKey(id)); err != nil {
			t.Fatalf("pinned %s after gc: %v", PackKey(id), err)
		}
	}
	if rep, err := Fsck(ctx, fake, ""); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("fsck --remote with a pin: %+v, %v", rep, err)
	}
	f.j = openClone(t, f.dir)
	l := f.open(t)
	// A pin written less than PinRenewAfter ago is not written again;
	// an older one is.
	if err := l.RenewPin(ctx); err != nil || fake.Stats().Requests[objstorefake.OpPut] != 0 {
		t.Fatalf("renewal of a fresh pin: %v, %d PUTs; want none", err, fake.Stats().Requests[objstorefake.OpPut])
	}
	pinNow = func() time.Time { return time.Now().Add(PinRenewAfter + time.Hour) }
	t.Cleanup(func() { pinNow = time.Now })
	if err := l.RenewPin(ctx); err != nil || fake.Stats().Requests[objstorefake.OpPut] != 1 {
		t.Fatalf("renewal of a day-old pin: %v, %d PUTs; want 1", err, fake.Stats().Requests[objstorefake.OpPut])
	}
	if m, err := readLazyMeta(f.dir); err != nil || m.PinnedAt.Before(time.Now().Add(PinRenewAfter)) {
		t.Fatalf("origin.json after the renewal: %+v, %v", m, err)
	}
	if got, err := f.read(t, "a.bin"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("a.bin in the lazy clone after gc: %d bytes, %v", len(got), err)
	}
	if err := l.Prefetch(ctx); err != nil || !l.Complete() {
		t.Fatalf("prefetch: %v (complete %v)", err, l.Complete())
	}
	if _, _, err := fake.Get(ctx, pinKey(pins[0].Store)); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("the pin of a store made whole: %v; want it deleted", err)
	}
	res = collect("gc without the pin")
	if res.Pins != 0 || res.Deleted.Packs == 0 {
		t.Fatalf("gc once the clone is whole: %+v; want the packs nothing reaches deleted", res)
	}
	checkRemote(t, fake, g.s, "w", g.at)
	if got, err := f.read(t, "a.bin"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("a.bin in the whole clone: %d bytes, %v", len(got), err)
	}
}

// TestPinExpires: a pin past its expiry keeps nothing, and gc deletes it
// once it has been expired for longer than the grace.
func TestPinExpires(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("pinexp")
	clk := newClock(fake)
	if _, err := remoteConfig(ctx, fake, true); err != nil {
		t.Fatal(err)
	}
	id := "00000000000000000000000000000000000000000000000000000000000000aa"
	if err := writePin(ctx, fake, "w", "store1", []string{id}); err != nil {
		t.Fatal(err)
	}
	if res, err := GC(ctx, fake, GCOptions{}); err != nil || res.Pins != 1 || res.PinsRemoved != 0 {
		t.Fatalf("gc with a fresh pin: %+v, %v", res, err)
	}
	clk.add(PinTTL + time.Minute)
	if res, err := GC(ctx, fake, GCOptions{}); err != nil || res.Pins != 0 || res.PinsRemoved != 0 {
		t.Fatalf("gc with an expired pin: %+v, %v; want it ignored and kept", res, err)
	}
	clk.add(DefaultGrace)
	if res, err := GC(ctx, fake, GCOptions{DryRun: true}); err != nil || res.PinsRemoved != 1 {
		t.Fatalf("dry gc past the pin's expiry and grace: %+v, %v", res, err)
	}
	if res, err := GC(ctx, fake, GCOptions{}); err != nil || res.PinsRemoved != 1 {
		t.Fatalf("gc past the pin's expiry and grace: %+v, %v", res, err)
	}
	if pins, err := readPins(ctx, fake); err != nil || len(pins) != 0 {
		t.Fatalf("pins left: %+v, %v", pins, err)
	}
}

// TestFsckPins: fsck --remote reports a damaged pin and an unexpired
// pin whose pack is gone.
func TestFsckPins(t *testing.T) {
	ctx := context.Background()
	fake := objstorefake.New("pinfsck")
	if _, err := remoteConfig(ctx, fake, true); err != nil {
		t.Fatal(err)
	}
	gone := "00000000000000000000000000000000000000000000000000000000000000aa"
	if err := writePin(ctx, fake, "w", "store1", []string{gone}); err != nil {
		t.Fatal(err)
	}
	if err := fake.Put(ctx, pinKey("store2"), []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	rep, err := Fsck(ctx, fake, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"pins/store1.json: pinned packs/" + gone + ".pack is gone", "pins/store2.json: "}
	if len(rep.Problems) != len(want) {
		t.Fatalf("fsck problems %q; want %d", rep.Problems, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(rep.Problems[i], w) {
			t.Errorf("problem %q; want it to start %q", rep.Problems[i], w)
		}
	}
}

func TestDecodePin(t *testing.T) {
	good := `{"format":1,"ws":"w","store":"s1","host":"h","packs":[],"expires":"2026-01-02T03:04:05Z"}` + "\n"
	if _, err := DecodePin("pins/s1.json", []byte(good)); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ key, data string }{
		"other key":     {"pins/s2.json", good},
		"bad ws":        {"pins/s1.json", `{"format":1,"ws":"../x","store":"s1","host":"h","packs":[],"expires":"2026-01-02T03:04:05Z"}` + "\n"},
		"bad pack":      {"pins/s1.json", `{"format":1,"ws":"w","store":"s1","host":"h","packs":["zz"],"expires":"2026-01-02T03:04:05Z"}` + "\n"},
		"no expiry":     {"pins/s1.json", `{"format":1,"ws":"w","store":"s1","host":"h","packs":[],"expires":"0001-01-01T00:00:00Z"}` + "\n"},
		"extra field":   {"pins/s1.json", `{"format":1,"ws":"w","store":"s1","host":"h","packs":[],"expires":"2026-01-02T03:04:05Z","x":1}` + "\n"},
		"not canonical": {"pins/s1.json", `{"format":1, "ws":"w","store":"s1","host":"h","packs":[],"expires":"2026-01-02T03:04:05Z"}` + "\n"},
	} {
		if _, err := DecodePin(c.key, []byte(c.data)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v; want ErrCorrupt", name, err)
		}
	}
}
