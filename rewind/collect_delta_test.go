package rewind

import (
	"fmt"
	"testing"

	"github.com/reynfs/reynfs/cas"
)

// TestCollectKeepsDeltaBases: the root directory of each generation is
// stored as a delta against the one before. A collection that keeps only
// the newest generation condemns the older roots, which the newest one's
// delta needs: they stay (counted as kept), and after a reopen (no cached
// objects) the kept generation reconstructs whole. Without the sweep's
// closure the older roots go and the reconstruct fails.
func TestCollectKeepsDeltaBases(t *testing.T) {
	w := &workspace{dir: t.TempDir()}
	w.open(t)
	for i := range 60 { // a root of some 3 KB: worth a delta
		putFile(t, w, fmt.Sprintf("file-%02d", i), uniqueData(byte(i), 100))
	}
	cutGen(t, w, KindManual, "one")
	putFile(t, w, "second", uniqueData(100, 100))
	cutGen(t, w, KindManual, "two")
	putFile(t, w, "third", uniqueData(101, 100))
	three := cutGen(t, w, KindManual, "three")
	gens, err := Timeline(w.j)
	if err != nil {
		t.Fatal(err)
	}
	root := gens[len(gens)-1].Rec.Root
	sizes := map[cas.Hash]int64{}
	if err := w.j.Objects().Each(func(h cas.Hash, n int64) error { sizes[h] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	if sizes[root] == 0 || sizes[root] > 200 {
		t.Fatalf("the newest root is stored in %d bytes, want a delta", sizes[root])
	}
	res, err := w.rw.Collect(CollectOptions{Keep: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.DroppedGens < 2 {
		t.Fatalf("collection dropped %d generations, want the older two", res.DroppedGens)
	}
	w.close(t)
	j := openJournal(t, w.dir)
	defer func() { _ = j.Close() }()
	tr, err := Reconstruct(j, three)
	if err != nil {
		t.Fatalf("the kept generation after the collection: %v", err)
	}
	if h, _, err := tr.Root(); err != nil || h != root {
		t.Fatalf("reconstructed root %s, %v; want %s", h.Short(), err, root.Short())
	}
}
