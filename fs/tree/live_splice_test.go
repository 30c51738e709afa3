package tree

import (
	"bytes"
	"io"
	"math/rand"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
)

// spliceRead assembles a ReadSplit reply the way fs does (moves spliced
// by the store into a pipe, the other slots written to it, in slot order)
// and returns its bytes and how many moves it had.
func spliceRead(t *testing.T, l *Live, ino uint64, off, n int) ([]byte, int, int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, 1<<20); err != nil {
		t.Fatal(err)
	}
	vecs, moves, got, err := l.ReadSplit(ino, uint64(off), n, make([]byte, n))
	if err != nil {
		t.Fatal(err)
	}
	nmoves := len(moves)
	for slot, v := range vecs {
		if len(moves) > 0 && moves[0].Slot == slot {
			if len(v) != 0 {
				t.Fatalf("slot %d is a move and holds %d bytes", slot, len(v))
			}
			if err := l.Splice(moves[0], int(w.Fd())); err != nil {
				t.Fatal(err)
			}
			moves = moves[1:]
			continue
		}
		if _, err := w.Write(v); err != nil {
			t.Fatal(err)
		}
	}
	if len(moves) != 0 {
		t.Fatalf("%d moves past the last slot", len(moves))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b, got, nmoves
}

// A reply made of ReadSplit's slices and spliced moves holds what ReadAt
// reads, for every mix of journaled chunks (read once, then spliced),
// write buffers, holes, short chunks and the end of the file; chunks in
// a write buffer are never moves.
func TestReadSplitMatchesReadAt(t *testing.T) {
	l, _ := newTestLive(t)
	l.stage.recentMax = 0 // the store, not the recent chunks, serves reads
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(2))
	moved := 0
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
			got, gn, m := spliceRead(t, l, st.Ino, off, n)
			moved += m
			if gn != wn || len(got) != gn || !bytes.Equal(got, want[:wn]) {
				t.Fatalf("step %d: ReadSplit(%d, %d) = %d bytes (reply %d), ReadAt %d; equal %v", step, off, n, gn, len(got), wn, bytes.Equal(got, want[:wn]))
			}
		}
	}
	for step := 0; step < 60; step++ {
		switch rng.Intn(5) {
		case 0, 1:
			p := make([]byte, rng.Intn(2*cas.ChunkSize)+1)
			rng.Read(p)
			if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, uint64(rng.Intn(8*cas.ChunkSize)), false); err != nil {
				t.Fatal(err)
			}
		case 2:
			if err := l.Flush(testCaller, st.Ino); err != nil {
				t.Fatal(err)
			}
			waitUnstaged(t, l)
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
	if moved == 0 {
		t.Fatal("no read was spliced")
	}
}
