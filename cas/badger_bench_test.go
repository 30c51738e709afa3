package cas_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
)

// Benchmarks of the Badger store, opened the way the journal opens it for
// file chunks (values above 1 KiB in the value log). Run with
//
//	go test -run '^$' -bench 'Badger' ./cas

func openBenchDB(b *testing.B) *badger.DB {
	b.Helper()
	db, err := badger.Open(badger.DefaultOptions(b.TempDir()).
		WithLogger(nil).WithValueThreshold(1 << 10).WithSyncWrites(false).
		WithDetectConflicts(false).WithMetricsEnabled(false))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := db.Close(); err != nil {
			b.Error(err)
		}
	})
	return db
}

// benchObject returns size bytes unique per n.
func benchObject(n, size int) []byte {
	data := make([]byte, size)
	for i := 0; i+8 <= size; i += 512 {
		binary.LittleEndian.PutUint64(data[i:], uint64(n)*1_000_003+uint64(i))
	}
	return data
}

var benchObjectSizes = []int{4 << 10, cas.ChunkSize}

// BenchmarkBadgerPut stores new objects (hash, miss, write).
func BenchmarkBadgerPut(b *testing.B) {
	for _, size := range benchObjectSizes {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			s := cas.NewBadger(openBenchDB(b))
			objs := make([][]byte, b.N)
			for i := range objs {
				objs[i] = benchObject(i, size)
			}
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := range b.N {
				if _, err := s.Put(objs[i]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBadgerPutDup stores objects that are already stored (dedup).
func BenchmarkBadgerPutDup(b *testing.B) {
	s := cas.NewBadger(openBenchDB(b))
	data := benchObject(1, cas.ChunkSize)
	if _, err := s.Put(data); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := s.Put(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBadgerGet reads stored objects back, through the verified-object
// cache (Cached) and without it (every read re-hashed, Uncached).
func BenchmarkBadgerGet(b *testing.B) {
	const count = 256
	for _, size := range benchObjectSizes {
		for _, cached := range []bool{true, false} {
			name := fmt.Sprintf("%dKiB/Uncached", size>>10)
			cacheBytes := int64(0)
			if cached {
				name = fmt.Sprintf("%dKiB/Cached", size>>10)
				cacheBytes = cas.DefaultCacheBytes
			}
			b.Run(name, func(b *testing.B) {
				s := cas.NewBadgerCache(openBenchDB(b), cacheBytes)
				hs := make([]cas.Hash, count)
				for i := range hs {
					h, err := s.Put(benchObject(i, size))
					if err != nil {
						b.Fatal(err)
					}
					hs[i] = h
				}
				b.SetBytes(int64(size))
				i := 0
				for b.Loop() {
					if _, err := s.Get(hs[i%count]); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}
