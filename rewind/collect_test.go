package rewind

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
)

// putFile writes a new file of data in the live tree and journals it.
func putFile(t *testing.T, w *workspace, name string, data []byte) {
	t.Helper()
	st, err := w.live.Create(modelCaller, tree.RootIno, name, syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.live.WriteAt(modelCaller, st.Ino, tree.NoHandle, data, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := w.live.Flush(modelCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	w.live.Forget(st.Ino, 1) // the kernel forgets it: once unlinked, it is gone
}

func uniqueData(seed byte, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed) * 2654435761
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func cutGen(t *testing.T, w *workspace, kind, label string) uint64 {
	t.Helper()
	g, err := w.rw.Cut(kind, label)
	if err != nil {
		t.Fatal(err)
	}
	return g.Seq
}

// TestCollectWindows: with a fine window of one record and a coarse one
// of two generations (auto ones not counted), a live collection drops the
// older generations, the records below the newest generation but the
// kept generations', and the data only they named; what stays
// reconstructs, ids do not shift, and a seq below the floor is refused
// naming the floor and its window.
func TestCollectWindows(t *testing.T) {
	w := &workspace{dir: t.TempDir()}
	w.open(t)
	defer func() { _ = w.j.Close() }()
	a, b, c := uniqueData(1, 300<<10), uniqueData(2, 300<<10), uniqueData(3, 300<<10)
	putFile(t, w, "a", a)
	one := cutGen(t, w, KindManual, "one")
	if err := w.live.Unlink(modelCaller, tree.RootIno, "a"); err != nil {
		t.Fatal(err)
	}
	putFile(t, w, "b", b)
	two := cutGen(t, w, KindManual, "two")
	if err := w.live.Unlink(modelCaller, tree.RootIno, "b"); err != nil {
		t.Fatal(err)
	}
	between := w.j.Head()
	putFile(t, w, "c", c)
	three := cutGen(t, w, KindTurn, "three")
	auto := cutGen(t, w, KindAuto, "")
	idThree, err := GenerationID(w.j, three)
	if err != nil {
		t.Fatal(err)
	}
	if err := SavePolicy(w.j, Policy{Seqs: Window{Count: 1}, Generations: Window{Count: 2}, Every: time.Minute}); err != nil {
		t.Fatal(err)
	}

	dry, err := w.rw.Collect(CollectOptions{Dry: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.rw.Collect(CollectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Floor != auto || res.Floors.Gen != two {
		t.Fatalf("floors %d/%d (%+v), want every seq from %d and generations from %d", res.Floor, res.Floors.Gen, res.Floors, auto, two)
	}
	if !strings.Contains(res.Floors.SeqBy, "seqs window (1 records)") || !strings.Contains(res.Floors.GenBy, "generations window (2 generations)") {
		t.Errorf("floors set by %q and %q", res.Floors.SeqBy, res.Floors.GenBy)
	}
	if res.DroppedGens != 2 || dry.DroppedGens != 2 { // import and one
		t.Errorf("dropped %d generations (dry %d), want 2", res.DroppedGens, dry.DroppedGens)
	}
	if res.Objects != dry.Objects || res.ObjectBytes < int64(len(a)) || res.ObjectBytes > int64(len(a))+64<<10 {
		t.Errorf("freed %d objects, %d bytes (dry %d); want a's %d bytes", res.Objects, res.ObjectBytes, dry.Objects, len(a))
	}
	for name, data := range map[string][]byte{"a": a, "b": b, "c": c} {
		h := cas.Sum(data[:cas.ChunkSize])
		ok, err := w.j.Objects().Has(h)
		if err != nil || ok != (name != "a") {
			t.Errorf("first chunk of %s stored: %v, %v", name, ok, err)
		}
	}
	for _, s := range []uint64{two, three, auto, w.j.Head()} {
		if _, err := Reconstruct(w.j, s); err != nil {
			t.Errorf("reconstruct retained %d: %v", s, err)
		}
		if got, err := Resolve(w.j, strconv.FormatUint(s, 10)); err != nil || got != s {
			t.Errorf("resolve retained %d: %d, %v", s, got, err)
		}
	}
	for _, s := range []uint64{one, between} {
		_, err := Reconstruct(w.j, s)
		if !errors.Is(err, ErrNotRetained) || !strings.Contains(err.Error(), "seqs window") {
			t.Errorf("reconstruct %d below the floor: %v; want not retained, naming the window", s, err)
		}
		if _, err := Resolve(w.j, strconv.FormatUint(s, 10)); !errors.Is(err, ErrNotRetained) {
			t.Errorf("resolve %d below the floor: %v", s, err)
		}
	}
	if id, err := GenerationID(w.j, three); err != nil || id != idThree {
		t.Errorf("id of three after the collection: %d, %v; was %d", id, err, idThree)
	}
	if _, err := Resolve(w.j, "g1"); !errors.Is(err, ErrNotRetained) {
		t.Errorf("g1 after the collection: %v", err)
	}
	// A second collection changes nothing; the daemon's periodic one
	// (IfMoved) does not even mark.
	again, err := w.rw.Collect(CollectOptions{})
	if err != nil || again.Objects != 0 || again.Records != 0 || again.DroppedGens != 0 || again.Floor != auto || again.Skipped {
		t.Errorf("second collection: %+v, %v", again, err)
	}
	if skip, err := w.rw.Collect(CollectOptions{IfMoved: true}); err != nil || !skip.Skipped {
		t.Errorf("periodic collection with the floors unmoved: %+v, %v", skip, err)
	}
	// The live tree still reads c.
	st, err := w.live.Lookup(tree.RootIno, "c")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(c))
	if n, err := w.live.ReadAt(st.Ino, got, 0); err != nil || n != len(c) || !bytes.Equal(got, c) {
		t.Errorf("read c after the collection: %d, %v", n, err)
	}
}

// TestCollectKeepsNamesAndHeld: a name on an old generation and a state
// held by a running operation lower the floors; once released, the next
// collection drops it.
func TestCollectKeepsNamesAndHeld(t *testing.T) {
	w := &workspace{dir: t.TempDir()}
	w.open(t)
	defer func() { _ = w.j.Close() }()
	putFile(t, w, "a", uniqueData(4, 100<<10))
	one := cutGen(t, w, KindManual, "one")
	putFile(t, w, "b", uniqueData(5, 100<<10))
	held := w.j.Head() // not a generation: its base (one) and the records after it stay
	two := cutGen(t, w, KindManual, "two")
	putFile(t, w, "c", uniqueData(6, 100<<10))
	cutGen(t, w, KindManual, "three")
	if err := SavePolicy(w.j, Policy{Seqs: Window{Count: 1}, Generations: Window{Count: 1}, Every: time.Minute}); err != nil {
		t.Fatal(err)
	}
	release, err := Hold(w.j, held, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.rw.Collect(CollectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Floor != one || !strings.Contains(res.Floors.SeqBy, "in use") {
		t.Fatalf("floor with seq %d held: %d (%s), want %d", held, res.Floor, res.Floors.SeqBy, one)
	}
	if _, err := Reconstruct(w.j, held); err != nil {
		t.Fatalf("held state: %v", err)
	}
	release()
	if err := SetName(w.j, "keepme", two); err != nil {
		t.Fatal(err)
	}
	res, err = w.rw.Collect(CollectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Floors.Gen != two || !strings.Contains(res.Floors.GenBy, `"keepme"`) {
		t.Fatalf("generation floor with two named: %d (%s), want %d", res.Floors.Gen, res.Floors.GenBy, two)
	}
	if _, err := Reconstruct(w.j, two); err != nil {
		t.Fatalf("named generation: %v", err)
	}
	if _, err := Reconstruct(w.j, held); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("released state after the next collection: %v", err)
	}
	if _, err := Hold(w.j, held, 0); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("hold of a dropped state: %v", err)
	}
}

// TestCollectKeepsOpenUnlinked: a file unlinked while the kernel still
// holds it keeps its data through a collection that drops every record and
// generation that named it.
func TestCollectKeepsOpenUnlinked(t *testing.T) {
	w := &workspace{dir: t.TempDir()}
	w.open(t)
	defer func() { _ = w.j.Close() }()
	data := uniqueData(7, 200<<10)
	st, err := w.live.Create(modelCaller, tree.RootIno, "open", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.live.WriteAt(modelCaller, st.Ino, tree.NoHandle, data, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := w.live.Flush(modelCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	cutGen(t, w, KindManual, "with it")
	if err := w.live.Unlink(modelCaller, tree.RootIno, "open"); err != nil {
		t.Fatal(err)
	}
	cutGen(t, w, KindManual, "without it")
	if _, err := w.rw.Collect(CollectOptions{Keep: 1}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if n, err := w.live.ReadAt(st.Ino, got, 0); err != nil || n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("read of the open unlinked file after the collection: %d, %v", n, err)
	}
}

func TestParseWindow(t *testing.T) {
	for in, want := range map[string]Window{"7d": {Age: 7 * day}, "2w": {Age: 14 * day}, "36h": {Age: 36 * time.Hour},
		"90s": {Age: 90 * time.Second}, "500": {Count: 500}, "1h30m": {Age: 90 * time.Minute}} {
		got, err := ParseWindow(in)
		if err != nil || got != want {
			t.Errorf("ParseWindow(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, err := ParseWindow(got.String()); err != nil || again != got {
			t.Errorf("ParseWindow(%q.String() = %q) = %+v, %v", in, got.String(), again, err)
		}
	}
	for _, in := range []string{"", "0", "-3", "d", "0.5s", "7x", "1e9d"} {
		if w, err := ParseWindow(in); !errors.Is(err, ErrPolicy) {
			t.Errorf("ParseWindow(%q) = %+v, %v; want ErrPolicy", in, w, err)
		}
	}
}
