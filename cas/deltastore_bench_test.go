package cas

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// Benchmarks of deltas in the segment log: what a read pays per link of a
// chain, and what a commit pays to write a version as a delta. Run with
//
//	go test -run '^$' -bench 'DeltaChain|CommitVersion' ./cas

func openBenchLogged(b *testing.B) *Badger {
	b.Helper()
	dir := b.TempDir()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")).WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	s, err := OpenLogged(db, filepath.Join(dir, "db.log"), LogOptions{ID: "bench", Create: true})
	if err == nil {
		_, err = s.CatchUp(false)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.CloseLog(); _ = db.Close() })
	return s
}

// dirVersion returns version i of a 4 KB directory-like object: 100
// 40-byte entries, the entry i%100 given a new 32-byte hash.
func dirVersion(prev []byte, i int) []byte {
	if prev == nil {
		prev = make([]byte, 4000)
		for j := 0; j+8 <= len(prev); j += 8 {
			binary.LittleEndian.PutUint64(prev[j:], uint64(j)*0x9E3779B97F4A7C15)
		}
	}
	v := bytes.Clone(prev)
	h := Sum(binary.LittleEndian.AppendUint64(nil, uint64(i)))
	copy(v[(i%100)*40+8:], h[:])
	return v
}

// BenchmarkGetDeltaChain reads a directory object cold (no cache) at the
// end of a chain of depth deltas: the cost of one link is the slope.
func BenchmarkGetDeltaChain(b *testing.B) {
	for _, depth := range []int{0, 8, 16, 31} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			s := openBenchLogged(b)
			var prev []byte
			var h, base Hash
			for i := 0; i <= depth; i++ {
				v := dirVersion(prev, i)
				h = Sum(v)
				if err := s.PutBatch([]Blob{{Hash: h, Data: v, Base: base}}); err != nil {
					b.Fatal(err)
				}
				prev, base = v, h
			}
			s.cache = newCache(0)
			for b.Loop() {
				if _, err := s.Get(h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCommitVersion commits one new version of a directory object,
// whole (no Base) or as a delta against the version before (as a
// checkpoint does for each directory on a changed path).
func BenchmarkCommitVersion(b *testing.B) {
	for _, delta := range []bool{false, true} {
		b.Run(fmt.Sprintf("delta=%v", delta), func(b *testing.B) {
			s := openBenchLogged(b)
			prev := dirVersion(nil, 0)
			base := Sum(prev)
			if _, err := s.Put(prev); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				i++
				v := dirVersion(prev, i)
				bl := Blob{Hash: Sum(v), Data: v}
				if delta {
					bl.Base = base
				}
				if _, _, err := s.Commit(&Frame{Blobs: []Blob{bl}}); err != nil {
					b.Fatal(err)
				}
				prev, base = v, bl.Hash
			}
		})
	}
}

// BenchmarkGetDataChain reads a 64 KiB file chunk cold (no cache) at the
// end of a chain of depth deltas, each version one 4 KiB page rewritten
// (a random writer's chunk; MaxDataChain bounds the depth at 8).
func BenchmarkGetDataChain(b *testing.B) {
	for _, depth := range []int{0, 4, 8, 16} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			s := openBenchLogged(b)
			v := make([]byte, ChunkSize)
			for j := 0; j+8 <= len(v); j += 8 {
				binary.LittleEndian.PutUint64(v[j:], uint64(j)*0x9E3779B97F4A7C15+7)
			}
			var prev []byte
			var h, base Hash
			for i := 0; i <= depth; i++ {
				v = bytes.Clone(v)
				page := (i * 7 % 16) * 4096
				for j := page; j < page+4096; j += 8 {
					binary.LittleEndian.PutUint64(v[j:], uint64(i+j)*0xC2B2AE3D27D4EB4F)
				}
				h = Sum(v)
				if err := s.PutBatch([]Blob{{Hash: h, Data: v, Base: base, BaseData: prev, Raw: true}}); err != nil {
					b.Fatal(err)
				}
				prev, base = v, h
			}
			s.cache = newCache(0)
			b.SetBytes(ChunkSize)
			for b.Loop() {
				if _, err := s.Get(h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
