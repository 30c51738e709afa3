package rewind

import "testing"

// BenchmarkOps reads the op log of a store of 1,000 files and 100,000
// data records, opened (Reindex) so that the restore index is current.
//
//	go test -run '^$' -bench Ops ./rewind
func BenchmarkOps(b *testing.B) {
	s := newBenchStore(b, 1000, 100_000)
	if err := Reindex(s.j); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := Ops(s.j); err != nil {
			b.Fatal(err)
		}
	}
}
