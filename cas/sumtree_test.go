package cas

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// SumChunk is Sum, whether it hashes a chunk whole or reuses an earlier
// version's subtree CVs for the parts that did not change (found by
// comparing the bytes: nothing tells it which changed), down a chain of
// versions as a random writer makes them.
func TestSumChunkMatchesSum(t *testing.T) {
	s := NewChunkSums(64)
	rng := rand.New(rand.NewPCG(1, 2))
	v := noise(11, ChunkSize)
	h := s.SumChunk(v, Hash{}, nil)
	if h != Sum(v) {
		t.Fatalf("whole chunk: %s, want %s", h.Short(), Sum(v).Short())
	}
	for i := range 200 {
		next := bytes.Clone(v)
		switch i % 4 {
		case 0: // a 4 KiB page
			copy(next[rng.IntN(16)*4096:], noise(uint64(i), 4096))
		case 1: // a few bytes anywhere, across a unit's edge too
			off := rng.IntN(ChunkSize - 16)
			copy(next[off:], noise(uint64(i), 1+rng.IntN(16)))
		case 2: // nothing
		case 3: // one byte flipped back and forth
			next[rng.IntN(ChunkSize)] ^= 1
		}
		got := s.SumChunk(next, h, v)
		if want := Sum(next); got != want {
			t.Fatalf("version %d: %s, want %s", i, got.Short(), want.Short())
		}
		v, h = next, got
	}
	// Not a whole chunk: Sum.
	for _, n := range []int{0, 1, 4096, ChunkSize - 1} {
		if got := s.SumChunk(v[:n], h, v); got != Sum(v[:n]) {
			t.Fatalf("%d bytes: %s, want Sum", n, got.Short())
		}
	}
	// An unknown base: hashed whole.
	w := noise(12, ChunkSize)
	if got := s.SumChunk(w, Sum(noise(13, ChunkSize)), v); got != Sum(w) {
		t.Fatalf("unknown base: %s", got.Short())
	}
}

// BenchmarkSumChunk: a 4 KiB write's new hash from its base's CVs against
// Sum of the whole chunk.
func BenchmarkSumChunk(b *testing.B) {
	v := noise(11, ChunkSize)
	next := bytes.Clone(v)
	copy(next[5*4096:], noise(3, 4096))
	b.Run("sum", func(b *testing.B) {
		b.SetBytes(ChunkSize)
		for b.Loop() {
			Sum(next)
		}
	})
	b.Run("whole", func(b *testing.B) {
		s := NewChunkSums(4)
		b.SetBytes(ChunkSize)
		for b.Loop() {
			s.SumChunk(next, Hash{}, nil)
		}
	})
	b.Run("page", func(b *testing.B) {
		s := NewChunkSums(4)
		h := s.SumChunk(v, Hash{}, nil)
		cv := s.get(h)
		b.SetBytes(ChunkSize)
		for b.Loop() {
			s.SumChunk(next, h, v)
			s.add(h, cv, Hash{}) // base's CVs again for the next round
		}
	})
}
