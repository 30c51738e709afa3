package tree

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/reynfs/reynfs/journal"
)

// Live over a real journal: references and open handles keep unlinked
// inodes alive, buffered writes reach the journal on Fsync, and a replay
// of the journal rebuilds what the live tree shows.

var testCaller = Caller{Pid: 42, Comm: "test", Uid: rootUid, Gid: rootGid}

func newTestLive(t testing.TB) (*Live, *journal.Journal) {
	t.Helper()
	j, err := journal.Open(t.TempDir(), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	tr := New(j.Objects(), rootMode, rootUid, rootGid, rootTime)
	return NewLive(tr, j, 2, 1, func(uint64) error { return nil }), j
}

// replay applies the journal's records to a fresh tree.
func replay(t *testing.T, j *journal.Journal) *Tree {
	t.Helper()
	tr := New(j.Objects(), rootMode, rootUid, rootGid, rootTime)
	err := j.Iter(1, func(r *journal.Record) error { return tr.Apply(r) })
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	return tr
}

func TestLiveUnlinkedStaysWhileReferenced(t *testing.T) {
	l, _ := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Lookup(RootIno, "f"); err != nil { // a second reference
		t.Fatal(err)
	}
	if err := l.Unlink(testCaller, RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	// The kernel still knows the inode: open and stat work, nlink is 0.
	got, err := l.GetAttr(st.Ino)
	if err != nil || got.Nlink != 0 {
		t.Fatalf("getattr of an unlinked referenced inode: %+v, %v", got, err)
	}
	if _, _, err := l.Open(st.Ino); err != nil {
		t.Fatalf("open of an unlinked referenced inode: %v", err)
	}
	l.Forget(st.Ino, 2)
	if _, err := l.GetAttr(st.Ino); err != nil {
		t.Fatalf("getattr while still open: %v", err)
	}
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, []byte("still here"), 0, false); err != nil {
		t.Fatalf("write while still open: %v", err)
	}
	buf := make([]byte, 20)
	if k, err := l.ReadAt(st.Ino, buf, 0); err != nil || string(buf[:k]) != "still here" {
		t.Fatalf("read back %q, %v", buf[:k], err)
	}
	l.Release(st.Ino)
	if _, err := l.GetAttr(st.Ino); !errors.Is(err, ErrStale) {
		t.Fatalf("getattr after the last reference and handle: %v, want ErrStale", err)
	}
	if inodes, pending := l.Counts(); pending != 0 {
		t.Errorf("%d inodes, %d pending bytes left after the orphan went", inodes, pending)
	}
}

func TestLiveForgetKeepsLinkedInodes(t *testing.T) {
	l, _ := newTestLive(t)
	st, err := l.Mkdir(testCaller, RootIno, "d", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	l.Forget(st.Ino, 1)
	l.Forget(st.Ino, 5) // more than was handed out: no underflow
	if _, err := l.Lookup(RootIno, "d"); err != nil {
		t.Fatalf("a forgotten inode that still has a name: %v", err)
	}
	if err := l.Rmdir(testCaller, RootIno, "d"); err != nil {
		t.Fatal(err)
	}
	// Referenced by the Lookup above: a removed directory stays statable
	// (a shell whose cwd it is), empty.
	if ents, _, err := l.Readdir(st.Ino); err != nil || len(ents) != 0 {
		t.Fatalf("readdir of a removed referenced directory: %v, %v", ents, err)
	}
	l.Forget(st.Ino, 1)
	if _, err := l.GetAttr(st.Ino); !errors.Is(err, ErrStale) {
		t.Fatalf("getattr after forget: %v, want ErrStale", err)
	}
}

func TestLiveFsyncJournalsBufferedWrites(t *testing.T) {
	l, j := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 10000) // 160 KB, 3 chunks
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, data, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, []byte("tail"), 0, true); err != nil { // O_APPEND
		t.Fatal(err)
	}
	want := append(bytes.Clone(data), "tail"...)
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	if d := j.Durable(); d != j.Head() {
		t.Fatalf("after fsync durable %d, head %d", d, j.Head())
	}
	tr := replay(t, j)
	n, err := tr.Lookup(RootIno, "f")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want)+10)
	k, err := tr.ReadAt(n, got, 0)
	if err != nil || !bytes.Equal(got[:k], want) {
		t.Fatalf("replayed content: %d bytes, %v; want %d bytes", k, err, len(want))
	}
	// Every record names the process that caused it.
	_ = j.Iter(1, func(r *journal.Record) error {
		if r.Pid != testCaller.Pid || r.Comm != testCaller.Comm {
			t.Errorf("record %d (%v) from pid %d %q", r.Seq, r.Op, r.Pid, r.Comm)
		}
		return nil
	})
}

// TestLiveUnlinkKeepsBufferedWrites: writes still buffered when the last
// name goes (a rename over the file) stay readable through the handle
// (the differential test once read back the flushed prefix only).
func TestLiveUnlinkKeepsBufferedWrites(t *testing.T) {
	l, _ := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Open(st.Ino); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, []byte("buffered"), 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create(testCaller, RootIno, "g", syscall.S_IFREG|0o644, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Rename(testCaller, RootIno, "g", RootIno, "f", 0); err != nil {
		t.Fatal(err)
	}
	if err := l.FlushAll(testCaller); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if k, err := l.ReadAt(st.Ino, buf, 0); err != nil || string(buf[:k]) != "buffered" {
		t.Fatalf("read of the replaced open file: %q, %v", buf[:k], err)
	}
	l.Release(st.Ino)
	l.Forget(st.Ino, 1)
	if _, pending := l.Counts(); pending != 0 {
		t.Errorf("%d pending bytes after the orphan went", pending)
	}
}
