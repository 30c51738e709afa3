package tree

import (
	"bytes"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/reynfs/reynfs/cas"
)

// TestRandomWritesRecycleBases: a random small writer's read-modify-writes
// read their chunks into buffers of the staging's pool
// (staging.GetOnceInto), keep them as their slots' bases and hand them
// back once the flush's commit is done (or at once when the write did not
// use them). A buffer handed back while a commit still builds a delta
// from it would be overwritten by the next read: the delta would be wrong
// and the file would not read back (the CRCs and then the hash catch it).
// The writes mix 4 KiB pages, unaligned writes across two chunks and
// whole chunks (whose slot drops its base), with flushes and fsyncs in
// between, and reads that check each write at once, the file as a whole
// live and after a replay of the journal.
func TestRandomWritesRecycleBases(t *testing.T) {
	l, j := newTestLive(t)
	l.stage.recentMax = 0 // every read-modify-write reads the store
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 11))
	model := make([]byte, 32*cas.ChunkSize)
	scribble(model, rng)
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, model, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	pooled := 0 // writes whose slot took a pooled buffer as its base
	for i := range 600 {
		var n int
		var off uint64
		switch i % 7 {
		case 3: // unaligned, across a chunk boundary
			n = 6000
			off = uint64(rng.IntN(len(model) - n))
		case 5: // a whole chunk
			n = cas.ChunkSize
			off = uint64(rng.IntN(32)) * cas.ChunkSize
		default:
			n = 4096
			off = uint64(rng.IntN(len(model)/4096)) * 4096
		}
		p := make([]byte, n)
		scribble(p, rng)
		copy(model[off:], p)
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, off, false); err != nil {
			t.Fatal(err)
		}
		l.mu.RLock()
		for _, b := range l.t.bases[l.t.nodes[st.Ino]] {
			if b.pooled {
				pooled++
				break
			}
		}
		l.mu.RUnlock()
		switch {
		case i%50 == 49:
			if err := l.Fsync(testCaller, st.Ino); err != nil {
				t.Fatal(err)
			}
		case i%9 == 8:
			if err := l.FlushAll(testCaller); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]byte, n)
		if k, err := l.ReadAt(st.Ino, got, off); err != nil || k != n || !bytes.Equal(got, p) {
			t.Fatalf("write %d: read back %d bytes, %v", i, k, err)
		}
	}
	if pooled < 300 {
		t.Fatalf("only %d of 600 writes kept a pooled buffer as a base", pooled)
	}
	if err := l.Sync(testCaller); err != nil {
		t.Fatal(err)
	}
	check := func(what string, tr *Tree) {
		t.Helper()
		got := make([]byte, len(model))
		if k, err := tr.ReadAt(tr.Node(st.Ino), got, 0); err != nil || k != len(model) || !bytes.Equal(got, model) {
			t.Fatalf("%s: read %d of %d bytes, %v; equal %v", what, k, len(model), err, bytes.Equal(got, model))
		}
	}
	l.mu.RLock()
	check("live", l.t)
	l.mu.RUnlock()
	check("replay", replay(t, j))
	l.stage.recycling.Wait()
}
