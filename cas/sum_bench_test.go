package cas

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/zeebo/blake3"
)

// The candidates measured before choosing Sum's algorithm (see doc.go for
// the figures). lukechampine.com/blake3 was measured in a scratch module
// outside the repo so that go.mod does not gain a dependency for a benchmark.
// Run with
//
//	go test -run='^$' -bench=BenchmarkSum -benchtime=2s -count=3 ./cas
var sumCandidates = []struct {
	name string
	sum  func([]byte) [32]byte
}{
	{"SHA256", sha256.Sum256},
	{"ZeeboBLAKE3", blake3.Sum256},
}

func benchSizes(b *testing.B, f func(b *testing.B, data []byte)) {
	for _, size := range []int{4 << 10, ChunkSize} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + i>>8)
		}
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			f(b, data)
		})
	}
}

// BenchmarkSum measures the chosen algorithm through Sum itself.
func BenchmarkSum(b *testing.B) {
	benchSizes(b, func(b *testing.B, data []byte) {
		for b.Loop() {
			Sum(data)
		}
	})
}

func BenchmarkSumCandidates(b *testing.B) {
	for _, c := range sumCandidates {
		b.Run(c.name, func(b *testing.B) {
			benchSizes(b, func(b *testing.B, data []byte) {
				for b.Loop() {
					c.sum(data)
				}
			})
		})
	}
}
