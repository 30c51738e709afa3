package rewind

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// Benchmarks of reconstruct(X) — the core of both rewind and crash recovery
// (Reconstruct(head)) — and of the root diff a rewind uses to invalidate the
// kernel's caches. Run with
//
//	go test -run '^$' -bench 'Reconstruct|DiffRoots' ./rewind

// benchStore is a store holding one import generation of files files
// (100 to a directory, 100 directories to a top directory) followed by
// records write records, each rewriting one file's content.
type benchStore struct {
	j    *journal.Journal
	gen  uint64      // seq of the generation
	inos []uint64    // the files' inodes
	root cas.Hash    // root of the generation
	objs *cas.Badger // j.Objects()
}

func newBenchStore(b *testing.B, files, records int) *benchStore {
	b.Helper()
	j, err := journal.Open(b.TempDir(), journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := j.Close(); err != nil {
			b.Error(err)
		}
	})
	tr := tree.New(j.Objects(), 0o755, 1000, 1000, 1)
	next := uint64(tree.RootIno + 1)
	alloc := func() uint64 { next++; return next - 1 }
	apply := func(r *journal.Record) {
		if err := tr.Apply(r); err != nil {
			b.Fatalf("apply %v %q: %v", r.Op, r.Name, err)
		}
	}
	s := &benchStore{j: j, objs: j.Objects()}
	var top, dir uint64
	for i := range files {
		if i%10000 == 0 {
			top = alloc()
			apply(&journal.Record{Op: journal.OpMkdir, Parent: tree.RootIno, Name: fmt.Sprintf("t%02d", i/10000), Ino: top, Mode: 0o755, Time: 2})
		}
		if i%100 == 0 {
			dir = alloc()
			apply(&journal.Record{Op: journal.OpMkdir, Parent: top, Name: fmt.Sprintf("d%02d", i/100%100), Ino: dir, Mode: 0o755, Time: 2})
		}
		ino := alloc()
		apply(&journal.Record{Op: journal.OpCreate, Parent: dir, Name: fmt.Sprintf("f%02d.go", i%100), Ino: ino, Mode: syscall.S_IFREG | 0o644, Time: 3})
		r, _ := benchWrite(ino, 0)
		apply(r)
		s.inos = append(s.inos, ino)
	}
	root, blobs, err := tr.Root()
	if err != nil {
		b.Fatal(err)
	}
	g, err := CommitImport(j, root, blobs, next, "bench")
	if err != nil {
		b.Fatal(err)
	}
	s.gen, s.root = g.Seq, root
	var last *journal.Pending
	for i := range records {
		r, bs := benchWrite(s.inos[(i*7919)%len(s.inos)], i+1)
		last = j.Enqueue(r, bs)
	}
	if last != nil {
		if err := last.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	if err := j.Sync(); err != nil {
		b.Fatal(err)
	}
	return s
}

// benchWrite is a write record giving file ino one small chunk that
// depends on v, and the chunk.
func benchWrite(ino uint64, v int) (*journal.Record, []cas.Blob) {
	data := fmt.Appendf(nil, "package p // version %d of file %d\n", v, ino)
	blob := cas.Blob{Hash: cas.Sum(data), Data: data}
	return &journal.Record{Op: journal.OpData, Ino: ino, Size: uint64(len(data)), Kind: journal.DataWrite,
		Chunks: []journal.Chunk{{Index: 0, Hash: blob.Hash}}, Mtime: int64(10 + v), Time: int64(10 + v)}, []cas.Blob{blob}
}

// BenchmarkReconstruct rebuilds the tree at head: load the generation's
// Merkle tree and replay the records after it. With records=0 it is a
// rewind to a generation; with many records, recovery after a crash.
func BenchmarkReconstruct(b *testing.B) {
	for _, c := range []struct{ files, records int }{
		{1000, 0}, {10000, 0}, {10000, 1000}, {10000, 10000}, {100000, 0}, {100000, 100},
	} {
		if c.files > 10000 && testing.Short() {
			continue // -short (scripts/bench.sh --quick) skips the 100k trees
		}
		b.Run(fmt.Sprintf("files=%d/records=%d", c.files, c.records), func(b *testing.B) {
			s := newBenchStore(b, c.files, c.records)
			head := s.j.Head()
			for b.Loop() {
				t, err := Reconstruct(s.j, head)
				if err != nil {
					b.Fatal(err)
				}
				if t.Len() < c.files {
					b.Fatalf("reconstructed %d inodes, want at least %d", t.Len(), c.files)
				}
			}
		})
	}
}

// BenchmarkDiffRoots diffs a generation's root against the root after
// changed files were rewritten: what a rewind walks to tell the kernel which
// names and contents to forget.
func BenchmarkDiffRoots(b *testing.B) {
	for _, c := range []struct{ files, changed int }{{10000, 100}, {100000, 100}} {
		if c.files > 10000 && testing.Short() {
			continue
		}
		b.Run(fmt.Sprintf("files=%d/changed=%d", c.files, c.changed), func(b *testing.B) {
			s := newBenchStore(b, c.files, c.changed)
			t, err := Reconstruct(s.j, s.j.Head())
			if err != nil {
				b.Fatal(err)
			}
			head, blobs, err := t.Root()
			if err != nil {
				b.Fatal(err)
			}
			o := NewOverlay(s.objs, blobs)
			var n int
			for b.Loop() {
				cs, err := DiffRoots(o, s.root, head)
				if err != nil {
					b.Fatal(err)
				}
				n = len(cs)
			}
			b.ReportMetric(float64(n), "changes")
		})
	}
}
