package tree

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
)

// BenchmarkLiveAppendClose is a log appended 4 KiB at a time, each append
// closed (journaled) and committed before the next, as the round trips of
// a real writer leave the committer time to: every append lands in the
// chunk the previous close stored.
func BenchmarkLiveAppendClose(b *testing.B) {
	l, st := benchFile(b, 0)
	p := bytes.Repeat([]byte("a log line\n"), 4096/11+1)[:4096] // zeros would be holes
	b.SetBytes(int64(len(p)))
	b.ResetTimer()
	for range b.N {
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, 0, true); err != nil {
			b.Fatal(err)
		}
		if err := l.Flush(testCaller, st.Ino); err != nil {
			b.Fatal(err)
		}
		for staged(l) > 0 {
			runtime.Gosched()
		}
	}
}

// staged counts the chunks whose commit has not been noted yet.
func staged(l *Live) int {
	l.stage.mu.Lock()
	defer l.stage.mu.Unlock()
	return len(l.stage.blobs)
}

// BenchmarkLiveRandomWriteSmallFile is fio randwrite 4k on a 4 MiB file
// (a small database): the write buffer journals every 16 chunks touched,
// and later writes land in chunks journaled moments ago.
func BenchmarkLiveRandomWriteSmallFile(b *testing.B) {
	const size = 4 << 20
	l, st := benchFile(b, size)
	p := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(1, 2))
	b.SetBytes(int64(len(p)))
	b.ResetTimer()
	for range b.N {
		binary.LittleEndian.PutUint64(p, rng.Uint64())
		off := uint64(rng.IntN(size/4096)) * 4096
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, off, false); err != nil {
			b.Fatal(err)
		}
	}
}

// benchFile makes a file of size random bytes, journaled.
func benchFile(b *testing.B, size int) (*Live, Stat) {
	b.Helper()
	l, _ := newTestLive(b)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i+8 <= size; i += 8 {
		binary.LittleEndian.PutUint64(data[i:], rng.Uint64())
	}
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, data, 0, false); err != nil {
		b.Fatal(err)
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		b.Fatal(err)
	}
	return l, st
}
