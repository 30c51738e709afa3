package tree

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// BenchmarkLiveFsync4k is fio's "write 4k + fsync": each 4 KiB append is
// journaled and synced before the next (one log flush per fsync).
func BenchmarkLiveFsync4k(b *testing.B) {
	l, st := benchFile(b, 0)
	p := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(5, 6))
	b.SetBytes(int64(len(p)))
	b.ResetTimer()
	for range b.N {
		for i := 0; i+8 <= len(p); i += 8 {
			binary.LittleEndian.PutUint64(p[i:], rng.Uint64()) // fio's scrambled buffers
		}
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, 0, true); err != nil {
			b.Fatal(err)
		}
		if err := l.Fsync(testCaller, st.Ino); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLiveRandomWriteLargeFile is fio randwrite 4k on a 64 MiB file:
// most writes land in a chunk neither pending nor among the recently
// committed ones, so each reads its chunk from the log and the flush
// stores it whole again.
func BenchmarkLiveRandomWriteLargeFile(b *testing.B) {
	const size = 64 << 20
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
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLiveSeqWrite1M is fio's sequential write with 1 MiB blocks:
// every write fills 16 whole chunks and reaches FileFlushBytes, so each
// is journaled at once; the last is synced.
func BenchmarkLiveSeqWrite1M(b *testing.B) {
	l, st := benchFile(b, 0)
	p := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 0; i+8 <= len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], rng.Uint64())
	}
	b.SetBytes(int64(len(p)))
	b.ResetTimer()
	for i := range b.N {
		binary.LittleEndian.PutUint64(p, uint64(i)) // no chunk repeats
		for c := 0; c < len(p); c += 64 << 10 {
			p[c] = byte(i)
			p[c+1] = byte(i >> 8)
		}
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, uint64(i)<<20, false); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		b.Fatal(err)
	}
}
