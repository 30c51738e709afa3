package rewind

import (
	"testing"

	"github.com/reynfs/reynfs/fs/tree"
)

// TestSeqOneIsAState: the store's first record is its import, one record
// before the import generation; the state at seq 1 is that import's tree,
// reconstructable and a rewind target like any other retained seq (it
// used to fail with "store holds no generation to start from").
func TestSeqOneIsAState(t *testing.T) {
	w := &workspace{dir: t.TempDir()}
	w.open(t)
	defer func() { _ = w.j.Close() }()
	if _, err := w.live.Create(modelCaller, tree.RootIno, "later.txt", 0o100644, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := w.rw.Cut(KindManual, "after"); err != nil {
		t.Fatal(err)
	}
	one, err := Reconstruct(w.j, 1)
	if err != nil {
		t.Fatalf("reconstruct 1: %v", err)
	}
	if d := diffStates(state{}, snapshotTree(t, one)); d != "" {
		t.Fatalf("state at seq 1: %s", d)
	}
	if _, err := RewindStore(w.j, 1, true); err != nil {
		t.Fatalf("dry rewind of the store to 1: %v", err)
	}
	res, err := w.rw.Rewind(1, false)
	if err != nil {
		t.Fatalf("rewind 1: %v", err)
	}
	if res.Summary.Removed != 1 {
		t.Errorf("rewind 1: summary %+v, want later.txt removed", res.Summary)
	}
	w.live.Lock()
	got := snapshotTree(t, w.live.Tree())
	w.live.Unlock()
	if d := diffStates(state{}, got); d != "" {
		t.Fatalf("live tree after rewind 1: %s", d)
	}
}
