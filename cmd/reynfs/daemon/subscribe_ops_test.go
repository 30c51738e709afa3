package daemon

import (
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/rewind"
)

// TestSubscribeRewindOps: the rewind event of each reset record says which
// operation it was (rewind, checkout, undo, redo) and its op id, as the op
// log lists them, so that a subscriber tells an undo from a rewind.
func TestSubscribeRewindOps(t *testing.T) {
	s := newTestService(t)
	d := &Daemon{j: s.J, log: zerolog.Nop(), done: make(chan struct{})}
	c := tree.Caller{Comm: "test"}
	if _, err := s.Live.Create(c, tree.RootIno, "a", syscall.S_IFREG|0o644, 0); err != nil {
		t.Fatal(err)
	}
	one, err := s.RW.Cut(rewind.KindManual, "one")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Live.Create(c, tree.RootIno, "b", syscall.S_IFREG|0o644, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RW.Cut(rewind.KindManual, "two"); err != nil {
		t.Fatal(err)
	}
	start := s.J.Head()
	// The moves as the daemon makes them: a rewind, an undo and a redo of
	// it (labelled by the op log's Next), and a checkout of the branch the
	// redo left behind.
	rw, err := s.RW.Rewind(one.Seq, false)
	if err != nil {
		t.Fatal(err)
	}
	move := func(redo bool) {
		t.Helper()
		l, err := rewind.Ops(s.J)
		if err != nil {
			t.Fatal(err)
		}
		m, err := l.Next(redo)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.RW.RewindAs(m.Target, false, m.Label); err != nil {
			t.Fatal(err)
		}
	}
	move(false)
	move(true)
	bs, err := rewind.Branches(s.J)
	if err != nil || len(bs) == 0 {
		t.Fatalf("branches after a redo: %v, %v", bs, err)
	}
	// Through the Rewinder, with the label checkout gives (s.checkout
	// without a daemon would rewind the store offline).
	if _, err := s.RW.RewindAs(bs[0].Tip, false, "checkout "+bs[0].Name); err != nil {
		t.Fatal(err)
	}

	evs, _, err := d.eventsAfter(start)
	if err != nil {
		t.Fatal(err)
	}
	var got []*api.RewindEvent
	for _, ev := range evs {
		if ev.Type == api.EventRewind {
			got = append(got, ev.Rewind)
		}
	}
	want := []struct {
		op     string
		of     bool
		branch string
	}{{rewind.OpRewind, false, ""}, {rewind.OpUndo, true, ""}, {rewind.OpRedo, true, ""}, {rewind.OpCheckout, false, bs[0].Name}}
	if len(got) != len(want) {
		t.Fatalf("%d rewind events %+v; want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Op != w.op || g.OpID != g.Seq || g.Branch != w.branch || (g.Of != 0) != w.of {
			t.Errorf("event %d: %+v; want op %s, op_id = seq, of set %v, branch %q", i, g, w.op, w.of, w.branch)
		}
		if w.of && g.Of != rw.Reset {
			t.Errorf("event %d: %s of op %d; want of the rewind, op %d", i, g.Op, g.Of, rw.Reset)
		}
	}
}
