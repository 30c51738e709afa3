package tree

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// A write of LendBytes or more of whole chunks lends its bytes to its
// flush (WriteAt): once it returns, nothing may hold them, since the FUSE
// server reuses the buffer for its next request. These tests reuse one
// buffer as go-fuse does and scribble over it after every write.

// lentStaged fails the test if the staging still holds lent bytes.
func lentStaged(t *testing.T, l *Live) {
	t.Helper()
	l.stage.mu.Lock()
	defer l.stage.mu.Unlock()
	for h, b := range l.stage.blobs {
		if b.lent {
			t.Fatalf("staging holds lent bytes of %s after the write returned", h.Short())
		}
	}
}

func scribble(p []byte, rng *rand.Rand) {
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
}

// TestLentWriteKeepsNoReference writes 1 MiB (and some unaligned) writes
// from one reused buffer, some with repeated chunks (one hash staged
// twice): every write reads back right at once, after a flush, and after
// a replay of the journal.
func TestLentWriteKeepsNoReference(t *testing.T) {
	l, j := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 5))
	p := make([]byte, FileFlushBytes+8192)
	var model []byte
	off := uint64(0)
	for i := range 24 {
		n := FileFlushBytes
		if i%5 == 4 {
			n += 8192 // unaligned from here on: partial head and tail chunks
		}
		w := p[:n]
		scribble(w, rng)
		if i%3 == 1 {
			copy(w[2*cas.ChunkSize:3*cas.ChunkSize], w[cas.ChunkSize:2*cas.ChunkSize]) // a repeated chunk
		}
		want := bytes.Clone(w)
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, w, off, false); err != nil {
			t.Fatal(err)
		}
		lentStaged(t, l)
		scribble(p, rng) // the server's next request
		if end := off + uint64(n); uint64(len(model)) < end {
			model = append(model, make([]byte, end-uint64(len(model)))...)
		}
		copy(model[off:], want)
		got := make([]byte, n)
		if k, err := l.ReadAt(st.Ino, got, off); err != nil || k != n || !bytes.Equal(got, want) {
			t.Fatalf("write %d: read back %d bytes, %v; equal %v", i, k, err, bytes.Equal(got, want))
		}
		off += uint64(n)
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(model))
	if k, err := l.ReadAt(st.Ino, got, 0); err != nil || k != len(model) || !bytes.Equal(got, model) {
		t.Fatalf("after fsync: read %d of %d bytes, %v; equal %v", k, len(model), err, bytes.Equal(got, model))
	}
	tr := replay(t, j)
	if k, err := tr.ReadAt(tr.Node(st.Ino), got, 0); err != nil || k != len(model) || !bytes.Equal(got, model) {
		t.Fatalf("after replay: read %d of %d bytes, %v; equal %v", k, len(model), err, bytes.Equal(got, model))
	}
}

// TestLentWriteFailsOwned fails a lending write after its whole chunks
// are in the file's buffers (the stored chunk its partial tail must
// read is gone): the buffers it leaves pending must be copies, so a
// later flush stores the written bytes and not what the reused request
// buffer holds by then.
func TestLentWriteFailsOwned(t *testing.T) {
	l, j := newTestLive(t)
	l.stage.recentMax = 0 // the tail's old chunk must come from the store
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 1))
	old := make([]byte, 2*FileFlushBytes)
	scribble(old, rng)
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, old, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	tail := uint64(FileFlushBytes / cas.ChunkSize)
	l.mu.RLock()
	gone := l.t.nodes[st.Ino].chunks[tail]
	l.mu.RUnlock()
	if err := j.Objects().Delete([]cas.Hash{gone}); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, FileFlushBytes+4096)
	scribble(p, rng)
	want := bytes.Clone(p[:FileFlushBytes])
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, 0, false); err == nil {
		t.Fatal("a write whose tail chunk cannot be read succeeded")
	}
	scribble(p, rng)
	if err := l.Flush(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, FileFlushBytes)
	if k, err := l.ReadAt(st.Ino, got, 0); err != nil || k != len(got) || !bytes.Equal(got, want) {
		t.Fatalf("whole chunks of the failed write: read %d bytes, %v; equal %v", k, err, bytes.Equal(got, want))
	}
}

// TestLentWriteConcurrentReader reads a file while a writer lends 1 MiB
// writes of one uniform byte each from one reused buffer, which it
// scribbles over as soon as each write returns: every chunk the reader
// gets must be uniform and of a byte some write wrote (or a hole's
// zero), never the scribble. Under -race, a reader handed the lent bytes
// themselves instead of a copy is also a reported race.
func TestLentWriteConcurrentReader(t *testing.T) {
	l, _ := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	const size = 4 * FileFlushBytes
	const scribbled = 0xEE
	done := make(chan struct{})
	failed := make(chan string, 1)
	go func() {
		defer close(failed)
		got := make([]byte, size)
		for {
			select {
			case <-done:
				return
			default:
			}
			k, err := l.ReadAt(st.Ino, got, 0)
			if err != nil {
				failed <- err.Error()
				return
			}
			for c := 0; c+cas.ChunkSize <= k; c += cas.ChunkSize {
				chunk := got[c : c+cas.ChunkSize]
				if chunk[0] == scribbled || !bytes.Equal(chunk, bytes.Repeat(chunk[:1], cas.ChunkSize)) {
					failed <- "a read saw bytes no write wrote"
					return
				}
			}
		}
	}()
	p := make([]byte, FileFlushBytes)
	for i := range 200 {
		for c := 0; c < len(p); c += cas.ChunkSize {
			v := byte(1 + (i*16+c/cas.ChunkSize)%200) // distinct chunks, never the scribble
			for k := c; k < c+cas.ChunkSize; k++ {
				p[k] = v
			}
		}
		off := uint64(i%4) * FileFlushBytes
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, off, false); err != nil {
			t.Fatal(err)
		}
		for k := range p {
			p[k] = scribbled
		}
	}
	close(done)
	if msg, ok := <-failed; ok {
		t.Fatal(msg)
	}
}

// TestLentWriteRepliesBeforeIndex holds the index write of a lending
// write's commit back (the "index" fault point, after the frame is in
// the log): WriteAt must return anyway (WaitLogged), the request buffer
// then be free for the server's next request, and a read meanwhile wait
// for the index and return the written bytes, not an error (the store
// does not know the chunks before their index) and not the scribble.
// Against a WriteAt that waits for the whole commit, the write never
// returns while the index is held: the test fails after a minute.
func TestLentWriteRepliesBeforeIndex(t *testing.T) {
	var gated atomic.Bool
	indexing := make(chan struct{}, 1)
	release := make(chan struct{})
	j, err := journal.Open(t.TempDir(), journal.Options{Fault: func(op string) error {
		if op == "index" && gated.Load() {
			indexing <- struct{}{}
			<-release
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	l := NewLive(New(j.Objects(), rootMode, rootUid, rootGid, rootTime), j, 2, 1, func(uint64) error { return nil })
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(testCaller); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 2))
	p := make([]byte, FileFlushBytes)
	scribble(p, rng)
	want := bytes.Clone(p)
	gated.Store(true)
	wrote := make(chan error, 1)
	go func() {
		_, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, 0, false)
		wrote <- err
	}()
	<-indexing // the frame is in the log, its index held back
	gated.Store(false)
	select {
	case err := <-wrote:
		if err != nil {
			close(release)
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		close(release)
		t.Fatal("the lending write waits for its index")
	}
	lentStaged(t, l)
	scribble(p, rng) // the server's next request
	l.stage.mu.Lock()
	waiting := 0
	for _, b := range l.stage.blobs {
		if b.data == nil && b.logged != nil {
			waiting++
		}
	}
	l.stage.mu.Unlock()
	if waiting != FileFlushBytes/cas.ChunkSize {
		close(release)
		t.Fatalf("%d chunks staged to wait for the index, want %d", waiting, FileFlushBytes/cas.ChunkSize)
	}
	read := make(chan error, 1)
	got := make([]byte, len(want))
	go func() {
		k, err := l.ReadAt(st.Ino, got, 0)
		if err == nil && k != len(got) {
			err = fmt.Errorf("read %d of %d bytes", k, len(got))
		}
		read <- err
	}()
	close(release)
	if err := <-read; err != nil {
		t.Fatalf("a read racing the index: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("a read racing the index returned other bytes than written")
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	tr := replay(t, j)
	if k, err := tr.ReadAt(tr.Node(st.Ino), got, 0); err != nil || k != len(want) || !bytes.Equal(got, want) {
		t.Fatalf("after replay: read %d bytes, %v; equal %v", k, err, bytes.Equal(got, want))
	}
}
