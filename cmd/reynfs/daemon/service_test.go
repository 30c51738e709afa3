package daemon

import (
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// newTestService serves an empty imported tree over a real journal, as the
// daemon does, without a mount.
func newTestService(t *testing.T) *Service {
	t.Helper()
	j, err := journal.Open(t.TempDir(), journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	empty := tree.New(j.Objects(), 0o755, 0, 0, 1)
	root, blobs, err := empty.Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rewind.CommitImport(j, root, blobs, 2, "import"); err != nil {
		t.Fatal(err)
	}
	tr, err := rewind.Reconstruct(j, j.Head())
	if err != nil {
		t.Fatal(err)
	}
	live := tree.NewLive(tr, j, 2, 1<<20, func(uint64) error { return nil })
	return &Service{J: j, Live: live, RW: &rewind.Rewinder{J: j, Live: live}}
}

// TestDiffThenRewind: diffing against the live tree computes its Merkle
// root; the objects that makes must stay readable for the generations and
// rewinds after it (they once were handed out and dropped).
func TestDiffThenRewind(t *testing.T) {
	s := newTestService(t)
	c := tree.Caller{Comm: "test"}
	st, err := s.Live.Create(c, tree.RootIno, "a", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	write := func(data string) {
		t.Helper()
		if _, err := s.Live.SetAttr(c, st.Ino, tree.SetAttrIn{Valid: tree.SetSize}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Live.WriteAt(c, st.Ino, tree.NoHandle, []byte(data), 0, false); err != nil {
			t.Fatal(err)
		}
	}
	write("one\ntwo\n")
	g, err := s.RW.Cut(rewind.KindManual, "first")
	if err != nil {
		t.Fatal(err)
	}
	write("one\nTWO\n")
	for range 2 {
		cs, patch, err := s.Diff("first", "", true)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || !strings.Contains(patch, "-two\n+TWO\n") {
			t.Fatalf("diff: %+v\n%s", cs, patch)
		}
	}
	for range 2 {
		if _, err := s.Rewind("first", true); err != nil {
			t.Fatalf("dry run: %v", err)
		}
	}
	if _, err := s.RW.Cut(rewind.KindManual, "after dry runs"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rewind("first", false); err != nil {
		t.Fatalf("rewind after diff: %v", err)
	}
	buf := make([]byte, 10)
	if k, err := s.Live.ReadAt(st.Ino, buf, 0); err != nil || string(buf[:k]) != "one\ntwo\n" {
		t.Fatalf("after rewind to %d: %q, %v", g.Seq, buf[:k], err)
	}
	if n, err := rewind.Verify(s.J); err != nil {
		t.Fatalf("verify after %d objects: %v", n, err)
	}
}
