package cas

import (
	"math/rand"
	"testing"
)

// Known BLAKE3-256 answers pin the algorithm: changing Sum renames every
// stored object, so it must never happen by accident.
func TestSumKnownAnswers(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"},
		{"abc", "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"},
	} {
		if got := Sum([]byte(tc.in)).String(); got != tc.want {
			t.Errorf("Sum(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestSummerMatchesSum: a Summer fed a chunk in pieces, summed between
// them, names every prefix exactly as Sum does, whatever the split points
// (BLAKE3's 64-byte blocks, 1 KiB chunks and zeebo/blake3's 8 KiB batches
// all have edges to get wrong), and a clone goes on independently.
func TestSummerMatchesSum(t *testing.T) {
	data := make([]byte, 2*ChunkSize+100)
	rand.New(rand.NewSource(1)).Read(data)
	cuts := []int{0, 1, 63, 64, 65, 1023, 1024, 1025, 4096, 8191, 8192, 8193, 12288, 16384 + 7, 32768, 65535, ChunkSize, ChunkSize + 1, 2*ChunkSize + 100}
	for _, a := range cuts {
		for _, b := range cuts {
			if b < a {
				continue
			}
			s := NewSummer()
			s.Write(data[:a])
			if got, want := s.Sum(), Sum(data[:a]); got != want {
				t.Fatalf("Sum after %d bytes = %s, want %s", a, got.Short(), want.Short())
			}
			c := s.Clone()
			c.Write(data[a:b])
			if got, want := c.Sum(), Sum(data[:b]); got != want {
				t.Fatalf("Sum after %d then %d bytes = %s, want %s", a, b-a, got.Short(), want.Short())
			}
			if c.Len() != int64(b) {
				t.Fatalf("Len = %d, want %d", c.Len(), b)
			}
			if got, want := s.Sum(), Sum(data[:a]); got != want {
				t.Fatalf("the clone changed its original: %s, want %s", got.Short(), want.Short())
			}
		}
	}
	// An appender's pattern: 4 KiB at a time, a Sum after each.
	s := NewSummer()
	for n := 4096; n <= ChunkSize; n += 4096 {
		s.Write(data[n-4096 : n])
		if got, want := s.Sum(), Sum(data[:n]); got != want {
			t.Fatalf("appends to %d bytes: %s, want %s", n, got.Short(), want.Short())
		}
	}
}
