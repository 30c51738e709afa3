package tree

import (
	"bytes"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// checkFlush builds n's flush record without committing it and checks what
// the hashes computed before the lock (Prepared.Sums) must never change:
// every blob is named by the hash of its bytes, every hole is all zeros.
func checkFlush(t *testing.T, l *Live, ino uint64) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.t.nodes[ino]
	if !n.Dirty() {
		return
	}
	r, blobs := l.t.Flush(n, journal.DataWrite)
	for _, b := range blobs {
		if got := cas.Sum(b.Data); got != b.Hash {
			t.Fatalf("flush names a chunk %s whose bytes hash to %s", b.Hash.Short(), got.Short())
		}
		switch want := cas.Incompressible(b.Data); {
		case b.BaseData != nil && !b.Raw:
			// A chunk with a base is likely a delta: the committer
			// judges it only if not.
		case b.Raw && !want && cas.IncompressibleQuick(b.Data):
			// A later chunk of a write whose first chunk looked
			// random, judged on the quick sample (WholeChunks).
		case b.Raw != want:
			t.Fatalf("chunk %s: Raw %v, but Incompressible says %v", b.Hash.Short(), b.Raw, want)
		}
	}
	for _, h := range r.Holes {
		for idx := h.Start; idx < h.Start+h.Count; idx++ {
			if b := n.pending[idx]; !allZero(b) {
				t.Fatalf("flush makes chunk %d a hole, but its buffer holds data", idx)
			}
		}
	}
}

// TestPreparedSumsFollowTheBuffers mixes whole-chunk writes (hashed before
// the lock) with the writes, truncates and hole punches that change a
// pending buffer afterwards: a flush must never journal a stale hash, and
// the file must read back as a plain byte model says, also after replay.
func TestPreparedSumsFollowTheBuffers(t *testing.T) {
	l, j := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	ino := st.Ino
	const span = 8 * cas.ChunkSize
	var model []byte
	rng := rand.New(rand.NewPCG(7, 11))
	fill := func(n int) []byte {
		p := make([]byte, n)
		switch rng.IntN(4) {
		case 0: // zeros: a hole when whole
		case 1: // one repeated byte: a chunk that dedups
			for i := range p {
				p[i] = 'x'
			}
		default:
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
		}
		return p
	}
	for step := range 400 {
		switch op := rng.IntN(10); {
		case op < 4: // whole chunks, aligned
			k := 1 + rng.IntN(3)
			off := uint64(rng.IntN(span/cas.ChunkSize-k+1)) * cas.ChunkSize
			p := fill(k * cas.ChunkSize)
			if _, err := l.WriteAt(testCaller, ino, NoHandle, p, off, false); err != nil {
				t.Fatal(err)
			}
			model = writeModel(model, p, off)
		case op < 6: // partial, into or across chunks
			off := uint64(rng.IntN(span))
			p := fill(1 + rng.IntN(3*cas.ChunkSize/2))
			if _, err := l.WriteAt(testCaller, ino, NoHandle, p, off, false); err != nil {
				t.Fatal(err)
			}
			model = writeModel(model, p, off)
		case op < 7: // append, whole chunks when the end is aligned
			p := fill(cas.ChunkSize * (1 + rng.IntN(2)))
			if _, err := l.WriteAt(testCaller, ino, NoHandle, p, 0, true); err != nil {
				t.Fatal(err)
			}
			model = writeModel(model, p, uint64(len(model)))
		case op < 8:
			size := uint64(rng.IntN(span))
			if rng.IntN(2) == 0 { // ftruncate: journaled at once
				if _, err := l.SetAttr(testCaller, ino, SetAttrIn{Valid: SetSize, Size: size}); err != nil {
					t.Fatal(err)
				}
			} else { // as a truncate does before its flush: the buffers stay pending
				l.mu.Lock()
				n := l.t.nodes[ino]
				err := l.t.Truncate(n, size, rootTime)
				l.markPending(testCaller, n)
				l.mu.Unlock()
				if err != nil {
					t.Fatal(err)
				}
			}
			model = truncModel(model, size)
		case op < 9:
			off, length := uint64(rng.IntN(span)), uint64(rng.IntN(2*cas.ChunkSize))
			if err := l.Fallocate(testCaller, ino, NoHandle, FallocPunchHole|FallocKeepSize, off, length); err != nil {
				t.Fatal(err)
			}
			for i := off; i < min(off+length, uint64(len(model))); i++ {
				model[i] = 0
			}
		default:
			if err := l.Flush(testCaller, ino); err != nil {
				t.Fatal(err)
			}
		}
		checkFlush(t, l, ino)
		got := make([]byte, span*2)
		k, err := l.ReadAt(ino, got, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:k], model) {
			t.Fatalf("step %d: file differs from the model (%d bytes, want %d)", step, k, len(model))
		}
	}
	if err := l.Fsync(testCaller, ino); err != nil {
		t.Fatal(err)
	}
	tr := replay(t, j)
	got := make([]byte, span*2)
	k, err := tr.ReadAt(tr.Node(ino), got, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:k], model) {
		t.Fatalf("replayed file differs from the model (%d bytes, want %d)", k, len(model))
	}
}

func writeModel(m, p []byte, off uint64) []byte {
	if end := off + uint64(len(p)); end > uint64(len(m)) {
		m = append(m, make([]byte, end-uint64(len(m)))...)
	}
	copy(m[off:], p)
	return m
}

func truncModel(m []byte, size uint64) []byte {
	if size <= uint64(len(m)) {
		return m[:size]
	}
	return append(m, make([]byte, size-uint64(len(m)))...)
}

// TestWholeChunks: the buffers are copies of the whole chunk slots p
// covers at off, in order, and the sums are theirs (zero for all zeros).
func TestWholeChunks(t *testing.T) {
	p := make([]byte, 5*cas.ChunkSize)
	for i := range p {
		p[i] = byte(i*7 + i/cas.ChunkSize)
	}
	clear(p[2*cas.ChunkSize+100 : 3*cas.ChunkSize+100]) // the third slot at off 100 is zeros
	copy(p[4*cas.ChunkSize:], bytes.Repeat([]byte{1, 2, 3, 5, 8, 13, 21, 34}, cas.ChunkSize/8))
	for _, off := range []uint64{0, 100, cas.ChunkSize - 1, cas.ChunkSize} {
		bufs, sums := WholeChunks(p, off)
		skip := (cas.ChunkSize - off%cas.ChunkSize) % cas.ChunkSize
		var want [][]byte
		for at := skip; at+cas.ChunkSize <= uint64(len(p)); at += cas.ChunkSize {
			want = append(want, p[at:at+cas.ChunkSize])
		}
		if len(bufs) != len(want) || len(sums) != len(want) {
			t.Fatalf("off %d: %d buffers and %d sums, want %d", off, len(bufs), len(sums), len(want))
		}
		for i, w := range want {
			if !bytes.Equal(bufs[i], w) || &bufs[i][0] == &w[0] {
				t.Fatalf("off %d: buffer %d is not a copy of its slot", off, i)
			}
			ws := ChunkSum{}
			if !allZero(w) {
				ws = ChunkSum{Hash: cas.Sum(w), Raw: cas.Incompressible(w)}
			}
			if sums[i] != ws {
				t.Fatalf("off %d: sum %d is %v, want %v", off, i, sums[i], ws)
			}
		}
	}
	if bufs, sums := WholeChunks(p[:cas.ChunkSize], 1); bufs != nil || sums != nil {
		t.Fatal("a write covering no whole slot has buffers or sums")
	}
}

// TestScatteredSmallWritesGather: 4 KiB writes to distinct chunks are
// journaled once the file's chunk buffers hold FileBufferBytes (they were
// journaled every 16 writes, each as a whole chunk, when a touched chunk
// counted as its buffer towards FileFlushBytes), and writes that land in
// the same chunk again are journaled once FileFlushBytes were written.
func TestScatteredSmallWritesGather(t *testing.T) {
	l, j := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "db", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	const chunks = 2 * FileBufferBytes / cas.ChunkSize
	base := bytes.Repeat([]byte("page"), chunks*cas.ChunkSize/4)
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, base, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	p := bytes.Repeat([]byte{7}, 4096)
	head := j.Head()
	perFlush := FileBufferBytes / cas.ChunkSize
	for i := range perFlush - 1 {
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, uint64(i)*cas.ChunkSize+100, false); err != nil {
			t.Fatal(err)
		}
	}
	if j.Head() != head {
		t.Fatalf("%d writes to distinct chunks were journaled before their buffers held %d bytes", perFlush-1, FileBufferBytes)
	}
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, uint64(perFlush-1)*cas.ChunkSize+100, false); err != nil {
		t.Fatal(err)
	}
	if j.Head() != head+1 {
		t.Fatalf("the write that filled %d bytes of buffers made %d records, want 1", FileBufferBytes, j.Head()-head)
	}
	head = j.Head()
	for i := range FileFlushBytes/len(p) - 1 {
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, uint64(i%4)*4096, false); err != nil {
			t.Fatal(err)
		}
	}
	if j.Head() != head {
		t.Fatalf("rewrites of one chunk were journaled before %d bytes were written", FileFlushBytes)
	}
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, 0, false); err != nil {
		t.Fatal(err)
	}
	if j.Head() != head+1 {
		t.Fatalf("%d bytes written made %d records, want 1", FileFlushBytes, j.Head()-head)
	}
}

// TestConcurrentAppendsKeepTheirChunks: O_APPEND writers race for the end
// of one file, so a write's chunks prepared for the end it saw before the
// lock (Prepared.At) are often not where it lands; it must then copy its
// bytes where it does land, never install the prepared ones. Every block
// reads back whole, from one writer, and every journaled chunk is named by
// its bytes' hash.
func TestConcurrentAppendsKeepTheirChunks(t *testing.T) {
	l, j := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "log", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A block and a half: the ends alternate between a chunk boundary and
	// the middle of a chunk, so a write that lands at another end than
	// it saw has its whole slots elsewhere in its bytes.
	const block, writers, each = 3 * cas.ChunkSize / 2, 3, 40
	content := func(id byte) []byte {
		p := make([]byte, block)
		for k := range p {
			p[k] = id ^ byte(k>>9)
		}
		return p
	}
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			var err error
			for i := range each {
				p := content(byte(w*each + i + 1))
				if _, err = l.WriteAt(testCaller, st.Ino, NoHandle, p, 0, true); err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	checkFlush(t, l, st.Ino)
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	for name, tr := range map[string]*Tree{"live": l.t, "replayed": replay(t, j)} {
		n := tr.Node(st.Ino)
		if n.Size != block*writers*each {
			t.Fatalf("%s: size %d, want %d", name, n.Size, block*writers*each)
		}
		seen := map[byte]bool{}
		buf := make([]byte, block)
		for off := uint64(0); off < n.Size; off += block {
			if _, err := tr.ReadAt(n, buf, off); err != nil {
				t.Fatal(err)
			}
			if buf[0] == 0 || seen[buf[0]] || !bytes.Equal(buf, content(buf[0])) {
				t.Fatalf("%s: block at %d is not one whole append", name, off)
			}
			seen[buf[0]] = true
		}
	}
}
