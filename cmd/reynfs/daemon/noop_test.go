package daemon

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/rewind"
)

// TestRewindNoOp: a rewind to the state the workspace is already in
// writes no record; one with a change since, buffered or journaled, does.
func TestRewindNoOp(t *testing.T) {
	s := newTestService(t)
	c := tree.Caller{Comm: "test"}
	st, err := s.Live.Create(c, tree.RootIno, "a", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.RW.Cut(rewind.KindManual, "cp")
	if err != nil {
		t.Fatal(err)
	}
	target := fmt.Sprint(g.Seq)
	noop := func(want bool) {
		t.Helper()
		head := s.J.Head()
		r, err := s.rewindNoOp(target)
		if err != nil {
			t.Fatal(err)
		}
		if got := r != nil && r.Already; got != want {
			t.Fatalf("rewind %s at head %d: already %v, want %v", target, head, got, want)
		}
	}
	noop(true)
	if _, err := s.RW.Cut(rewind.KindManual, "again"); err != nil { // a generation changes nothing
		t.Fatal(err)
	}
	noop(true)
	// A write still buffered in the live tree is a change.
	if _, err := s.Live.WriteAt(c, st.Ino, tree.NoHandle, []byte("x"), 0, false); err != nil {
		t.Fatal(err)
	}
	noop(false)
	if _, err := s.RW.Rewind(g.Seq, false); err != nil {
		t.Fatal(err)
	}
	// After the rewind the workspace is at the target: the reset record and
	// its generation change nothing.
	head := s.J.Head()
	noop(true)
	if s.J.Head() != head {
		t.Fatalf("a no-op check wrote records: head %d -> %d", head, s.J.Head())
	}
	// An earlier seq on the path is not the current state.
	target = "1"
	noop(false)
}
