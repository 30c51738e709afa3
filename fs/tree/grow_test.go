package tree

import (
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/reynfs/reynfs/cas"
)

// TestAppendsHashIncrementally: a file that grows by write + fsync (fio's
// write+fsync, a WAL) has its last chunk hashed from the BLAKE3 state the
// previous flush left (Tree.grows) plus the appended bytes, and every
// chunk it names is exactly cas.Sum of its bytes: also after writes into
// the chunk's already hashed part, a truncation, a hole and rolling over
// into the next chunk, where the note must not be used as it was. Fails
// without the notes (no state kept: nothing to check Len of).
func TestAppendsHashIncrementally(t *testing.T) {
	l, _ := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 3))
	random := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	var model []byte
	write := func(p []byte, off int) {
		t.Helper()
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, uint64(off), false); err != nil {
			t.Fatal(err)
		}
		if end := off + len(p); end > len(model) {
			model = append(model, make([]byte, end-len(model))...)
		}
		copy(model[off:], p)
	}
	incremental := 0
	for i := range 80 {
		switch {
		case i%13 == 5 && len(model) > 100: // into the hashed part
			write(random(100), rng.IntN(len(model)-100))
		case i%17 == 9: // cut into the last chunk
			size := len(model) - rng.IntN(min(len(model), 6000))
			l.mu.Lock()
			err := l.t.Truncate(l.t.nodes[st.Ino], uint64(size), 1)
			l.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			model = model[:size]
		case i%19 == 11: // a hole's worth of zeros appended
			write(make([]byte, 4096), len(model))
		default: // an append, not always 4 KiB
			write(random(4096+rng.IntN(3)*1000), len(model))
		}
		if err := l.Fsync(testCaller, st.Ino); err != nil {
			t.Fatal(err)
		}
		l.mu.RLock()
		n := l.t.nodes[st.Ino]
		for idx, h := range n.chunks {
			lo := idx * cas.ChunkSize
			hi := min(lo+cas.ChunkSize, len(model))
			want := cas.Sum(model[lo:hi])
			if allZero(model[lo:hi]) {
				want = cas.Hash{}
			}
			if h != want {
				l.mu.RUnlock()
				t.Fatalf("step %d: chunk %d is named %s, its bytes hash to %s", i, idx, h.Short(), want.Short())
			}
		}
		if g := l.t.grows[n]; g != nil && g.hash == n.chunks[len(n.chunks)-1] {
			if g.s.Len() != int64(len(model)%cas.ChunkSize) {
				t.Errorf("step %d: the note summed %d bytes, the last chunk holds %d", i, g.s.Len(), len(model)%cas.ChunkSize)
			}
			incremental++
		}
		l.mu.RUnlock()
	}
	if incremental < 40 {
		t.Errorf("the last chunk's hash state was kept after %d of 80 fsyncs", incremental)
	}
}
