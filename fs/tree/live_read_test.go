package tree

import (
	"bytes"
	"errors"
	"math/rand"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas"
)

// ReadVec returns what ReadAt reads, for every mix of journaled chunks,
// write buffers, holes, short chunks and the end of the file.
func TestReadVecMatchesReadAt(t *testing.T) {
	l, _ := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	check := func(step int) {
		t.Helper()
		size := int(mustStat(t, l, st.Ino).Size)
		for k := 0; k < 20; k++ {
			off := rng.Intn(size + cas.ChunkSize)
			n := rng.Intn(3*cas.ChunkSize) + 1
			want := make([]byte, n)
			wn, err := l.ReadAt(st.Ino, want, uint64(off))
			if err != nil {
				t.Fatal(err)
			}
			scratch := make([]byte, n)
			vecs, gn, err := l.ReadVec(st.Ino, uint64(off), n, scratch)
			if err != nil {
				t.Fatal(err)
			}
			got := bytes.Join(vecs, nil)
			if gn != wn || len(got) != gn || !bytes.Equal(got, want[:wn]) {
				t.Fatalf("step %d: ReadVec(%d, %d) = %d bytes (len %d), ReadAt %d; equal %v", step, off, n, gn, len(got), wn, bytes.Equal(got, want[:wn]))
			}
		}
	}
	for step := 0; step < 60; step++ {
		switch rng.Intn(5) {
		case 0, 1: // a write somewhere in the first eight chunks
			p := make([]byte, rng.Intn(2*cas.ChunkSize)+1)
			rng.Read(p)
			if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, uint64(rng.Intn(8*cas.ChunkSize)), false); err != nil {
				t.Fatal(err)
			}
		case 2:
			if err := l.Flush(testCaller, st.Ino); err != nil { // journal the buffers
				t.Fatal(err)
			}
		case 3:
			if _, err := l.SetAttr(testCaller, st.Ino, SetAttrIn{Valid: SetSize, Size: uint64(rng.Intn(9 * cas.ChunkSize))}); err != nil {
				t.Fatal(err)
			}
		case 4:
			if err := l.Fallocate(testCaller, st.Ino, NoHandle, FallocPunchHole|FallocKeepSize, uint64(rng.Intn(6*cas.ChunkSize)), uint64(rng.Intn(3*cas.ChunkSize))); err != nil {
				t.Fatal(err)
			}
		}
		check(step)
	}
}

// A slice ReadVec returned keeps its bytes when the file is written
// afterwards: write buffers are copied, journaled chunks are immutable.
func TestReadVecStable(t *testing.T) {
	l, _ := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	old := bytes.Repeat([]byte("a"), 2*cas.ChunkSize)
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, old, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, []byte("bbbb"), cas.ChunkSize, false); err != nil {
		t.Fatal(err)
	}
	vecs, n, err := l.ReadVec(st.Ino, 0, len(old), make([]byte, len(old)))
	if err != nil || n != len(old) {
		t.Fatal(n, err)
	}
	want := bytes.Join(vecs, nil)
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, bytes.Repeat([]byte("c"), len(old)), 0, false); err != nil {
		t.Fatal(err)
	}
	if got := bytes.Join(vecs, nil); !bytes.Equal(got, want) || !bytes.Equal(got[cas.ChunkSize:cas.ChunkSize+4], []byte("bbbb")) {
		t.Error("a later write changed the bytes a ReadVec had returned")
	}
}

func mustStat(t *testing.T, l *Live, ino uint64) Stat {
	t.Helper()
	st, err := l.GetAttr(ino)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Journaled chunks a read covers from their start are read from the store
// into their place in the scratch buffer (no copy, nothing cached), and
// the bytes are the file's: whole chunks, a short last chunk, a read
// ending inside a chunk, holes.
func TestReadVecIntoScratch(t *testing.T) {
	l, _ := newTestLive(t)
	l.stage.recentMax = 0 // the store, not the recent chunks, serves reads
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 5*cas.ChunkSize+1000)
	rand.New(rand.NewSource(2)).Read(data)
	clear(data[2*cas.ChunkSize : 3*cas.ChunkSize]) // a hole
	for _, part := range [][2]int{{0, 2 * cas.ChunkSize}, {3 * cas.ChunkSize, len(data)}} {
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, data[part[0]:part[1]], uint64(part[0]), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	into := 0
	for _, r := range [][2]int{{0, len(data)}, {0, 3 * cas.ChunkSize}, {cas.ChunkSize, 100}, {100, 2 * cas.ChunkSize}, {4 * cas.ChunkSize, 2 * cas.ChunkSize}} {
		off, n := r[0], r[1]
		scratch := make([]byte, n)
		vecs, got, err := l.ReadVec(st.Ino, uint64(off), n, scratch)
		if err != nil {
			t.Fatal(err)
		}
		want := data[off:min(off+n, len(data))]
		if got != len(want) || !bytes.Equal(bytes.Join(vecs, nil), want) {
			t.Fatalf("ReadVec(%d, %d): wrong bytes", off, n)
		}
		for i := range scratch { // changes what was read into scratch only
			scratch[i] ^= 0xff
		}
		if !bytes.Equal(bytes.Join(vecs, nil), want) {
			into++
		}
	}
	if into == 0 {
		t.Fatal("no chunk was read into the scratch buffer")
	}
}

// A chunk that a write replaced and the collector swept between ReadVec's
// plan (under the lock) and its store read is not an error: the read is
// done again under the lock and returns the file as it is now.
func TestReadVecChunkSweptMeanwhile(t *testing.T) {
	l, j := newTestLive(t)
	l.stage.recentMax = 0
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := make([]byte, cas.ChunkSize)
	rand.New(rand.NewSource(3)).Read(a)
	b := bytes.Repeat([]byte("b"), cas.ChunkSize)
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, a, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	waitUnstaged(t, l)
	l.afterPlan = func() {
		l.afterPlan = nil
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, b, 0, false); err != nil {
			t.Error(err)
		}
		if err := l.Fsync(testCaller, st.Ino); err != nil {
			t.Error(err)
		}
		if err := j.Objects().Delete([]cas.Hash{cas.Sum(a)}); err != nil {
			t.Error(err)
		}
	}
	vecs, n, err := l.ReadVec(st.Ino, 0, cas.ChunkSize, make([]byte, cas.ChunkSize))
	if err != nil || n != cas.ChunkSize || !bytes.Equal(bytes.Join(vecs, nil), b) {
		t.Fatalf("ReadVec across a sweep: %d bytes, %v; the new bytes %v", n, err, bytes.Equal(bytes.Join(vecs, nil), b))
	}
}

// waitUnstaged waits until the staging area holds no uncommitted chunk.
func waitUnstaged(t *testing.T, l *Live) {
	t.Helper()
	for range 500 {
		l.stage.mu.Lock()
		n := len(l.stage.blobs)
		l.stage.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("staged chunks still held 5 s after their commit")
}

// A read of many chunks, which fill reads several at a time, returns the
// error of the first bad chunk in file order (here two are gone from the
// store), whichever worker met it first.
func TestReadVecFirstErrorInFileOrder(t *testing.T) {
	l, j := newTestLive(t)
	l.stage.recentMax = 0
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 12*cas.ChunkSize)
	rand.New(rand.NewSource(5)).Read(data)
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, data, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	waitUnstaged(t, l)
	vecs, n, err := l.ReadVec(st.Ino, 0, len(data), make([]byte, len(data)))
	if err != nil || n != len(data) || !bytes.Equal(bytes.Join(vecs, nil), data) {
		t.Fatalf("ReadVec of 12 chunks: %d bytes, %v", n, err)
	}
	gone := []cas.Hash{cas.Sum(data[9*cas.ChunkSize : 10*cas.ChunkSize]), cas.Sum(data[4*cas.ChunkSize : 5*cas.ChunkSize])}
	if err := j.Objects().Delete(gone); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		_, _, err := l.ReadVec(st.Ino, 0, len(data), make([]byte, len(data)))
		if !errors.Is(err, cas.ErrNotFound) || !strings.Contains(err.Error(), "chunk 4:") {
			t.Fatalf("ReadVec with chunks 4 and 9 gone: %v, want chunk 4's ErrNotFound", err)
		}
	}
}
