package rewind

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// TestCutRefusedIsNotIndexed: a generation record the journal refuses was
// never stored, so Cut fails and indexes nothing (it used to index seq 0
// and report a generation that does not exist), the journal keeps taking
// writes, and the objects the refused cut computed are kept, so the next
// generation, which names the same root, reconstructs.
func TestCutRefusedIsNotIndexed(t *testing.T) {
	w := &workspace{dir: t.TempDir()}
	w.open(t)
	t.Cleanup(func() { _ = w.j.Close() })
	c := modelCaller
	st, err := w.live.Create(c, tree.RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.live.WriteAt(c, st.Ino, tree.NoHandle, []byte("kept"), 0, false); err != nil {
		t.Fatal(err)
	}
	before, err := Generations(w.j)
	if err != nil {
		t.Fatal(err)
	}

	huge := strings.Repeat("x", journal.MaxRecordSize+1)
	g, err := w.rw.Cut(KindManual, huge)
	if err == nil {
		t.Fatalf("cut with a %d-byte label: generation seq %d, want an error", len(huge), g.Seq)
	}
	if !errors.Is(err, journal.ErrInvalid) {
		t.Errorf("cut with a huge label: %v, want ErrInvalid", err)
	}
	after, err := Generations(w.j)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("generations %v after a refused cut, want %v", after, before)
	}

	g, err = w.rw.Cut(KindManual, "next")
	if err != nil {
		t.Fatalf("cut after a refused one: %v", err)
	}
	tr, err := Reconstruct(w.j, g.Seq)
	if err != nil {
		t.Fatalf("reconstruct the generation after a refused cut: %v", err)
	}
	n, err := lookupPath(tr, "f")
	if err != nil || n.Size != 4 {
		t.Fatalf("f in generation %d: %v, %v", g.Seq, n, err)
	}
}

// TestCutFailedCommitIsNotIndexed: a generation whose commit fails (the
// disk full past the reserve fails it the same way) is an error and is
// not indexed; so is a cut on the journal failed by it (refused at
// Enqueue, no seq).
func TestCutFailedCommitIsNotIndexed(t *testing.T) {
	w := &workspace{dir: t.TempDir()}
	w.open(t)
	if err := w.j.Close(); err != nil {
		t.Fatal(err)
	}
	var fail atomic.Bool // read by the committer goroutine
	j, err := journal.Open(w.dir, journal.Options{Fault: func(op string) error {
		if fail.Load() && op == "commit" {
			return journal.ErrNoSpace
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	w.j = j
	tr, err := Reconstruct(j, j.Head())
	if err != nil {
		t.Fatal(err)
	}
	next := tr.MaxIno() + 1<<20
	w.live = tree.NewLive(tr, j, next, next+1<<20, func(uint64) error { return nil })
	w.rw = &Rewinder{J: j, Live: w.live}
	before, err := Generations(j)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.live.Create(modelCaller, tree.RootIno, "f", syscall.S_IFREG|0o644, 0); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	for _, label := range []string{"failed commit", "failed journal"} {
		if g, err := w.rw.Cut(KindManual, label); err == nil {
			t.Fatalf("cut (%s): generation seq %d, want an error", label, g.Seq)
		} else if !errors.Is(err, journal.ErrFailed) {
			t.Errorf("cut (%s): %v, want ErrFailed", label, err)
		}
	}
	after, err := Generations(j)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("generations %v after failed cuts, want %v", after, before)
	}
}

// TestRewindResetRefused: a rewind whose reset record the journal refuses
// (here a journal opened read-only: Enqueue refuses, Sync has nothing to
// wait for) changes nothing and reports no reset; it used to swap the live
// tree to the target with no reset stored, and index a generation at seq 0.
func TestRewindResetRefused(t *testing.T) {
	w := &workspace{dir: t.TempDir()}
	w.open(t)
	c := modelCaller
	g, err := w.rw.Cut(KindManual, "empty")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.live.Create(c, tree.RootIno, "later", syscall.S_IFREG|0o644, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := w.rw.Cut(KindManual, "later"); err != nil {
		t.Fatal(err)
	}
	if err := w.j.Close(); err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(w.dir, journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	tr, err := Reconstruct(j, j.Head())
	if err != nil {
		t.Fatal(err)
	}
	next := tr.MaxIno() + 1<<20
	live := tree.NewLive(tr, j, next, next+1<<20, func(uint64) error { return nil })
	rw := &Rewinder{J: j, Live: live}
	if res, err := rw.Rewind(g.Seq, false); err == nil {
		t.Errorf("rewind with the reset refused: reset %d, want an error", res.Reset)
	} else if !errors.Is(err, journal.ErrReadOnly) {
		t.Errorf("rewind with the reset refused: %v, want ErrReadOnly", err)
	}
	if _, err := live.Lookup(tree.RootIno, "later"); err != nil {
		t.Errorf("later after a refused rewind: %v, want it still there", err)
	}
	if res, err := RewindStore(j, g.Seq, false); err == nil {
		t.Errorf("offline rewind with the reset refused: reset %d, want an error", res.Reset)
	}
}
