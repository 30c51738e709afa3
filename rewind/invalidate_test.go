package rewind

import (
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/reynfs/reynfs/fs/tree"
)

// kernelInv behaves as the kernel does when it is told to drop an inode's
// pages: it first has a FUSE handler answer (a shared mapping's dirty page
// written back), and that handler needs the live tree's lock. Sent under
// the lock, each notification would wait forever; here it gives up after a
// while and counts a deadlock.
type kernelInv struct {
	live      *tree.Live
	ino       uint64
	mu        sync.Mutex
	sent      int
	deadlocks int
}

func (k *kernelInv) handler() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = k.live.WriteAt(tree.Caller{Comm: "writeback"}, k.ino, tree.NoHandle, []byte("x"), 0, false)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		k.mu.Lock()
		k.deadlocks++
		k.mu.Unlock()
	}
	k.mu.Lock()
	k.sent++
	k.mu.Unlock()
}

func (k *kernelInv) InvalidateInode(uint64)         { k.handler() }
func (k *kernelInv) InvalidateEntry(uint64, string) { k.handler() }
func (k *kernelInv) WriteBack() error               { k.handler(); return nil }

// TestRewindInvalidatesOutsideTheLock: every notification of a rewind and
// a cut is sent when a FUSE handler can take the live lock (invariant 12).
func TestRewindInvalidatesOutsideTheLock(t *testing.T) {
	w := &workspace{dir: t.TempDir()}
	w.open(t)
	t.Cleanup(func() { _ = w.j.Close() })
	c := modelCaller
	st, err := w.live.Create(c, tree.RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	mapped, err := w.live.Create(c, tree.RootIno, "mapped", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	g, err := w.rw.Cut(KindManual, "before")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.live.WriteAt(c, st.Ino, tree.NoHandle, []byte("later"), 0, false); err != nil {
		t.Fatal(err)
	}
	k := &kernelInv{live: w.live, ino: mapped.Ino}
	w.rw.Inv = k
	if _, err := w.rw.Cut(KindManual, "after"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.rw.Rewind(g.Seq, false); err != nil {
		t.Fatal(err)
	}
	if k.sent < 3 { // write-backs of both, f's inode, the root
		t.Errorf("%d notifications sent, want at least 3", k.sent)
	}
	if k.deadlocks > 0 {
		t.Errorf("%d of %d notifications were sent while the live lock was held", k.deadlocks, k.sent)
	}
}

// TestRestoreInvalidatesOutsideTheLock: a restore tells the kernel about
// the entry it replaced, the old inode and the parent, each when a FUSE
// handler can take the live lock (invariant 12), like a rewind.
func TestRestoreInvalidatesOutsideTheLock(t *testing.T) {
	w := &workspace{dir: t.TempDir()}
	w.open(t)
	t.Cleanup(func() { _ = w.j.Close() })
	c := modelCaller
	st, err := w.live.Create(c, tree.RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.live.WriteAt(c, st.Ino, tree.NoHandle, []byte("v1"), 0, false); err != nil {
		t.Fatal(err)
	}
	if err := w.live.Flush(c, st.Ino); err != nil {
		t.Fatal(err)
	}
	v1 := w.j.Head()
	if err := w.live.Unlink(c, tree.RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.live.Create(c, tree.RootIno, "f", syscall.S_IFREG|0o644, 0); err != nil {
		t.Fatal(err)
	}
	mapped, err := w.live.Create(c, tree.RootIno, "mapped", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	k := &kernelInv{live: w.live, ino: mapped.Ino}
	w.rw.Inv = k
	res, err := w.rw.Restore("f", v1, ".reynfs")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Replaced || res.Seq == 0 {
		t.Errorf("restore f: %+v, want a record that replaced the new f", res)
	}
	if k.sent != 3 { // the entry, the replaced inode, the root
		t.Errorf("%d notifications sent, want 3", k.sent)
	}
	if k.deadlocks > 0 {
		t.Errorf("%d of %d notifications were sent while the live lock was held", k.deadlocks, k.sent)
	}
}
