package tree

import (
	"fmt"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// Benchmarks of the incremental Merkle root: the cost of a checkpoint's
// Root after N files changed in a tree of F files. Run with
//
//	go test -run '^$' -bench 'MerkleRoot' ./fs/tree

// benchTree builds files regular files of 100 bytes, 100 to a directory,
// 100 directories to a top directory (root/tNN/dNN/fNN: the depth of a
// source tree), computes the root once, and returns the files' inodes.
func benchTree(b *testing.B, files int) (*Tree, []uint64) {
	b.Helper()
	tr, _ := newTestTree(b)
	next := uint64(RootIno + 1)
	alloc := func() uint64 { next++; return next - 1 }
	apply := func(r *journal.Record) {
		if err := tr.Apply(r); err != nil {
			b.Fatalf("apply %v %q: %v", r.Op, r.Name, err)
		}
	}
	var inos []uint64
	var top, dir uint64
	for i := range files {
		if i%10000 == 0 {
			top = alloc()
			apply(rMkdir(RootIno, fmt.Sprintf("t%02d", i/10000), top))
		}
		if i%100 == 0 {
			dir = alloc()
			apply(rMkdir(top, fmt.Sprintf("d%02d", i/100%100), dir))
		}
		ino := alloc()
		apply(rCreate(dir, fmt.Sprintf("f%02d.go", i%100), ino))
		apply(benchData(ino, i))
		inos = append(inos, ino)
	}
	if _, _, err := tr.Root(); err != nil {
		b.Fatal(err)
	}
	return tr, inos
}

// benchData is a write record giving file ino one 100-byte chunk named by v.
func benchData(ino uint64, v int) *journal.Record {
	return &journal.Record{Op: journal.OpData, Ino: ino, Size: 100, Kind: journal.DataWrite,
		Chunks: []journal.Chunk{{Index: 0, Hash: cas.Sum(fmt.Appendf(nil, "content %d of %d", v, ino))}},
		Mtime:  int64(20 + v), Time: int64(20 + v)}
}

// BenchmarkMerkleRoot: apply N changes to files spread over the tree (each
// in another directory where the tree allows), then compute the new root.
// One op is the N applies and the Root call.
func BenchmarkMerkleRoot(b *testing.B) {
	for _, files := range []int{1000, 10000, 100000} {
		if files > 10000 && testing.Short() {
			continue // -short (scripts/bench.sh --quick) skips the 100k trees
		}
		tr, inos := benchTree(b, files)
		for _, changed := range []int{1, 10, 100, 1000} {
			if changed > files {
				continue
			}
			b.Run(fmt.Sprintf("files=%d/changed=%d", files, changed), func(b *testing.B) {
				stride := len(inos) / changed
				v := 0
				var blobs int
				for b.Loop() {
					v++
					for k := range changed {
						if err := tr.Apply(benchData(inos[k*stride+v%stride], v)); err != nil {
							b.Fatal(err)
						}
					}
					_, bs, err := tr.Root()
					if err != nil {
						b.Fatal(err)
					}
					blobs = len(bs)
				}
				b.ReportMetric(float64(blobs), "objects/root")
			})
		}
	}
}

// BenchmarkMerkleRootFull hashes a whole tree from scratch (the first
// generation of an import).
func BenchmarkMerkleRootFull(b *testing.B) {
	for _, files := range []int{10000, 100000} {
		if files > 10000 && testing.Short() {
			continue
		}
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
			tr, _ := benchTree(b, files)
			for b.Loop() {
				for _, n := range tr.nodes {
					n.dirty = true
				}
				if _, _, err := tr.Root(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
