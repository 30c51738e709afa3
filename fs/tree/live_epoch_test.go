package tree

import (
	"errors"
	"syscall"
	"testing"
)

// TestLiveStaleHandleRefusedUnderLock: a write, fallocate, copy or
// ftruncate through a handle opened before a swap fails with ErrStale, as
// decided by the live tree itself under the lock Swap holds (invariant 5),
// and leaves the swapped-in tree as it was; the same calls through a
// handle of the current epoch, or through none, go through.
func TestLiveStaleHandleRefusedUnderLock(t *testing.T) {
	l, _ := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	src, err := l.Create(testCaller, RootIno, "src", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteAt(testCaller, src.Ino, NoHandle, []byte("source bytes"), 0, false); err != nil {
		t.Fatal(err)
	}
	if err := l.FlushAll(testCaller); err != nil {
		t.Fatal(err)
	}
	old := l.Epoch()
	if old == NoHandle {
		t.Fatalf("a handle's epoch is NoHandle: its writes would never be stale")
	}
	if _, err := l.WriteAt(testCaller, st.Ino, old, []byte("before"), 0, false); err != nil {
		t.Fatalf("write through a current handle: %v", err)
	}

	l.Lock()
	l.Swap(l.Tree()) // a rewind to the same state: every open handle is stale
	l.Unlock()

	stale := map[string]func() error{
		"write": func() error {
			_, err := l.WriteAt(testCaller, st.Ino, old, []byte("STALE!"), 0, false)
			return err
		},
		"append": func() error {
			_, err := l.WriteAt(testCaller, st.Ino, old, []byte("STALE!"), 0, true)
			return err
		},
		"fallocate": func() error { return l.Fallocate(testCaller, st.Ino, old, 0, 0, 1<<20) },
		"copy_file_range": func() error {
			_, err := l.CopyRange(testCaller, src.Ino, 0, st.Ino, old, 0, 6)
			return err
		},
		"ftruncate": func() error {
			_, err := l.SetAttr(testCaller, st.Ino, SetAttrIn{Valid: SetSize, Size: 1 << 20, Epoch: old})
			return err
		},
	}
	for name, op := range stale {
		if err := op(); !errors.Is(err, ErrStale) {
			t.Errorf("%s through a handle opened before the swap: %v, want ErrStale", name, err)
		}
	}
	a, err := l.GetAttr(st.Ino)
	if err != nil {
		t.Fatal(err)
	}
	if a.Size >= 1<<20 {
		t.Errorf("after stale calls the file has %d bytes: a stale fallocate or ftruncate landed", a.Size)
	}
	buf := make([]byte, 16)
	if k, _ := l.ReadAt(st.Ino, buf, 0); string(buf[:min(k, 6)]) == "STALE!" {
		t.Errorf("a stale write landed: %q", buf[:k])
	}

	cur := l.Epoch()
	if cur == old {
		t.Fatalf("Swap did not move the epoch")
	}
	if _, err := l.WriteAt(testCaller, st.Ino, cur, []byte("after"), 0, false); err != nil {
		t.Errorf("write through a handle opened after the swap: %v", err)
	}
	if _, err := l.CopyRange(testCaller, src.Ino, 0, st.Ino, cur, 5, 6); err != nil {
		t.Errorf("copy through a handle opened after the swap: %v", err)
	}
	if _, err := l.SetAttr(testCaller, st.Ino, SetAttrIn{Valid: SetSize, Size: 8}); err != nil {
		t.Errorf("truncate by path (no handle): %v", err)
	}
	if k, err := l.ReadAt(st.Ino, buf, 0); err != nil || string(buf[:k]) != "aftersou" {
		t.Errorf("content %q, %v; want %q", buf[:k], err, "aftersou")
	}
}
