package tree

import (
	"bytes"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// blockingStore holds every Get of one hash until release is closed.
type blockingStore struct {
	cas.Store
	block   atomic.Pointer[cas.Hash]
	entered chan struct{}
	release chan struct{}
}

func (s *blockingStore) Get(h cas.Hash) ([]byte, error) {
	if b := s.block.Load(); b != nil && *b == h {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-s.release
	}
	return s.Store.Get(h)
}

// storedFile makes a file of two full chunks of distinct non-zero bytes,
// committed, with no recent chunks kept, so that writes into
// it read the store.
func storedFile(t *testing.T, s cas.Store) (*Live, *journal.Journal, Stat, []byte) {
	t.Helper()
	j, err := journal.Open(t.TempDir(), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	if bs, ok := s.(*blockingStore); ok {
		bs.Store = j.Objects()
	} else {
		s.(*countingStore).Store = j.Objects()
	}
	l := NewLive(New(s, rootMode, rootUid, rootGid, rootTime), j, 2, 1, func(uint64) error { return nil })
	setRecentMax(l, 0)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	data := append(bytes.Repeat([]byte{1}, cas.ChunkSize), bytes.Repeat([]byte{2}, cas.ChunkSize)...)
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, data, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	settle(t, l)
	return l, j, st, data
}

// A write that must read a stored chunk reads it without holding the
// live tree's lock: other requests go on while the store is slow.
func TestLiveWriteReadsStoreOutsideLock(t *testing.T) {
	bs := &blockingStore{entered: make(chan struct{}, 1), release: make(chan struct{})}
	l, _, st, data := storedFile(t, bs)
	released := false
	defer func() {
		if !released {
			close(bs.release)
		}
	}()
	h := cas.Sum(data[:cas.ChunkSize])
	bs.block.Store(&h)
	wrote := make(chan error, 1)
	go func() {
		_, err := l.WriteAt(testCaller, st.Ino, NoHandle, []byte("new"), 100, false)
		wrote <- err
	}()
	select {
	case <-bs.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the write never read the stored chunk")
	}
	answered := make(chan error, 1)
	go func() {
		_, err := l.GetAttr(st.Ino)
		if err == nil {
			_, err = l.Lookup(RootIno, "f")
		}
		answered <- err
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("getattr and lookup waited for a write's store read: the write holds the lock across it")
	}
	close(bs.release)
	released = true
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	copy(data[100:], "new")
	got := make([]byte, len(data))
	if k, err := l.ReadAt(st.Ino, got, 0); err != nil || !bytes.Equal(got[:k], data) {
		t.Fatalf("after the write: %d bytes, %v", k, err)
	}
}

// A write of a whole chunk slot does not read the chunk it replaces; a
// partial one reads it once.
func TestLiveWholeChunkWriteSkipsRead(t *testing.T) {
	cs := &countingStore{}
	l, j, st, data := storedFile(t, cs)
	whole := bytes.Repeat([]byte{3}, cas.ChunkSize)
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, whole, cas.ChunkSize, false); err != nil {
		t.Fatal(err)
	}
	if n := cs.gets.Load(); n != 0 {
		t.Fatalf("overwriting a whole chunk read the store %d times, want 0", n)
	}
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, []byte{4}, 10, false); err != nil {
		t.Fatal(err)
	}
	if n := cs.gets.Load(); n != 1 {
		t.Fatalf("a 1-byte write into a stored chunk read the store %d times, want 1", n)
	}
	copy(data[cas.ChunkSize:], whole)
	data[10] = 4
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	r := replay(t, j)
	got := make([]byte, len(data))
	if k, err := r.ReadAt(r.nodes[st.Ino], got, 0); err != nil || !bytes.Equal(got[:k], data) {
		t.Fatalf("replayed: %d bytes, %v", k, err)
	}
}
