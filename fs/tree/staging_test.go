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

// countingStore counts the reads that reach the journal's real store.
type countingStore struct {
	cas.Store
	gets atomic.Int64
}

func (c *countingStore) Get(h cas.Hash) ([]byte, error) {
	c.gets.Add(1)
	return c.Store.Get(h)
}

func newCountingLive(t *testing.T) (*Live, *journal.Journal, *countingStore) {
	t.Helper()
	j, err := journal.Open(t.TempDir(), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	cs := &countingStore{Store: j.Objects()}
	tr := New(cs, rootMode, rootUid, rootGid, rootTime)
	return NewLive(tr, j, 2, 1, func(uint64) error { return nil }), j, cs
}

// settle waits until every held blob's commit has been noted.
func settle(t *testing.T, l *Live) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		l.stage.mu.Lock()
		n := len(l.stage.blobs)
		l.stage.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d staged blobs still waiting for their commit", n)
		}
	}
}

// A write into the chunk a committed flush just stored reads it from the
// recent chunks, not from the store, and the file and its replay hold
// every byte.
func TestLiveRewriteOfRecentChunkSkipsStore(t *testing.T) {
	l, j, cs := newCountingLive(t)
	st, err := l.Create(testCaller, RootIno, "log", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := range 8 {
		line := bytes.Repeat([]byte{byte('a' + i)}, 1000)
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, line, 0, true); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(testCaller, st.Ino); err != nil { // close(2)
			t.Fatal(err)
		}
		if err := j.Sync(); err != nil {
			t.Fatal(err)
		}
		settle(t, l)
		want = append(want, line...)
	}
	if n := cs.gets.Load(); n != 0 {
		t.Fatalf("7 appends to a chunk committed a moment ago read the store %d times, want 0", n)
	}
	got := make([]byte, 2*len(want))
	if k, err := l.ReadAt(st.Ino, got, 0); err != nil || !bytes.Equal(got[:k], want) {
		t.Fatalf("live read: %d bytes, %v", k, err)
	}
	r := replay(t, j)
	if k, err := r.ReadAt(r.nodes[st.Ino], got, 0); err != nil || !bytes.Equal(got[:k], want) {
		t.Fatalf("replayed read: %d bytes, %v", k, err)
	}
}

// The recent chunks stay within recentMax, oldest out first, and an
// evicted chunk is read from the store again.
func TestStagingRecentBounded(t *testing.T) {
	l, j, cs := newCountingLive(t)
	setRecentMax(l, 4*cas.ChunkSize)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		chunk := bytes.Repeat([]byte{byte(1 + i)}, cas.ChunkSize)
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, chunk, uint64(i)*cas.ChunkSize, false); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(testCaller, st.Ino); err != nil {
			t.Fatal(err)
		}
		// One commit at a time: each commit's chunks are noted by a
		// goroutine of its own, in whatever order they run.
		if err := j.Sync(); err != nil {
			t.Fatal(err)
		}
		settle(t, l)
	}
	l.stage.mu.Lock()
	n, size := len(l.stage.recent), l.stage.recentBytes
	l.stage.mu.Unlock()
	if n != 4 || size > 4*cas.ChunkSize {
		t.Fatalf("recent chunks: %d of %d bytes, want 4 within %d", n, size, 4*cas.ChunkSize)
	}
	buf := make([]byte, 1)
	for i, wantGets := range []int64{1, 0} { // chunk 0 was evicted, chunk 7 is recent
		before := cs.gets.Load()
		off := uint64([]int{0, 7}[i]) * cas.ChunkSize
		if _, err := l.ReadAt(st.Ino, buf, off); err != nil || buf[0] != byte(1+off/cas.ChunkSize) {
			t.Fatalf("read chunk at %d: %v %v", off, buf, err)
		}
		if got := cs.gets.Load() - before; got != wantGets {
			t.Fatalf("read of chunk at %d reached the store %d times, want %d", off, got, wantGets)
		}
	}
}

// setRecentMax bounds the committed chunks l's staging keeps.
func setRecentMax(l *Live, n int) {
	l.stage.mu.Lock()
	l.stage.recentMax = n
	l.stage.mu.Unlock()
}
