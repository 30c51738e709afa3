package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Every chunking cuts a file into pieces that put back together give the
// file, within its bounds; a content-defined one cuts the same bytes the
// same way after an insertion near the front, which fixed chunks cannot.
func TestSplitters(t *testing.T) {
	data := randomBytes(3<<20, 1)
	shifted := append(append(append([]byte{}, data[:1000]...), "inserted"...), data[1000:]...)
	for _, s := range splitters {
		a, err := s.split(data)
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Join(a, nil); !bytes.Equal(got, data) {
			t.Fatalf("%s: chunks do not rebuild the input", s.name)
		}
		b, err := s.split(shifted)
		if err != nil {
			t.Fatal(err)
		}
		have := map[cas.Hash]bool{}
		for _, c := range a {
			have[cas.Sum(c)] = true
		}
		var shared int
		for _, c := range b {
			if have[cas.Sum(c)] {
				shared += len(c)
			}
		}
		cdc := !strings.HasPrefix(s.name, "fixed")
		// restic's default chunks average 1 MiB: the insert costs one or two
		// of the three, the rest must still dedup
		want := len(data) / 2
		if strings.Contains(s.name, "1M") {
			want = 1
		}
		if cdc && shared < want {
			t.Errorf("%s: only %d of %d bytes dedup after an 8-byte insert", s.name, shared, len(data))
		}
		if !cdc && shared != 0 {
			t.Errorf("%s: %d bytes dedup after a shift, want 0", s.name, shared)
		}
	}
	for _, c := range must(fastCDC(16<<10, 64<<10, 256<<10)(data)) {
		if len(c) > 256<<10 {
			t.Fatalf("FastCDC chunk of %d bytes, above its bound", len(c))
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A delta against a similar base is far smaller than the object alone; a
// history stores nothing for an unchanged file and only the new tail chunk
// of an appended one.
func TestDeltaAndHistory(t *testing.T) {
	base := randomBytes(64<<10, 2)
	next := append([]byte{}, base...)
	copy(next[100:], "changed")
	c, err := newCompressor()
	if err != nil {
		t.Fatal(err)
	}
	d, err := withDict(next, base)
	if err != nil {
		t.Fatal(err)
	}
	if alone := c.size(next, levels[1].level); d > 1024 || alone < 60<<10 {
		t.Fatalf("delta %d bytes, alone %d: want a small delta of incompressible data", d, alone)
	}
	h := newHistory(c)
	log := randomBytes(200<<10, 3)
	for _, v := range [][]byte{log, log, append(log, randomBytes(10, 4)...)} {
		if err := h.file("app.log", v); err != nil {
			t.Fatal(err)
		}
	}
	if h.versions != 2 {
		t.Fatalf("%d versions stored, want 2 (the unchanged one is free)", h.versions)
	}
	// fixed 64 KiB: 4 chunks, then only the tail chunk changes
	if got := h.t[0].chunks; got != 5 {
		t.Fatalf("fixed 64 KiB stored %d chunks, want 5", got)
	}
}

// The store report reads a real store read-only: it finds the generation's
// directory, file inode and chunk and counts each once.
func TestStoreReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("line of text\n"), 100)
	ch := cas.Sum(chunk)
	file := &cas.Inode{Ino: 2, Mode: cas.ModeRegular | 0o644, Size: uint64(len(chunk)), Chunks: []cas.Hash{ch}}
	fb := cas.EncodeInode(file)
	root := &cas.Inode{Ino: 1, Mode: cas.ModeDir | 0o755, Entries: []cas.Entry{{Name: "a.txt", Ino: 2, Object: cas.Sum(fb)}}}
	rb := cas.EncodeInode(root)
	blobs := []cas.Blob{{Hash: ch, Data: chunk}, {Hash: cas.Sum(fb), Data: fb}, {Hash: cas.Sum(rb), Data: rb}}
	r := &journal.Record{Op: journal.OpGeneration, GenKind: "manual", Root: cas.Sum(rb), NextIno: 3}
	if err := j.Enqueue(r, blobs).Wait(); err != nil {
		t.Fatal(err)
	}
	// a write that replaces the chunk: the write path's table prices it
	// as a delta to the chunk its slot held (the import's)
	next := append(bytes.Repeat([]byte("line of text\n"), 99), "last line\n"...)
	w0 := &journal.Record{Op: journal.OpData, Ino: 2, Size: uint64(len(next)),
		Chunks: []journal.Chunk{{Index: 0, Hash: cas.Sum(next)}}}
	if err := j.Enqueue(w0, []cas.Blob{{Hash: cas.Sum(next), Data: next}}).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := rewind.Reindex(j); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	if err := runStore(w, dir); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	for _, want := range []string{"Objects (1 generations)", "| chunk | 1 | 0 | 1300 |", "| file inode | 1 | 32 |", "| dir inode | 1 | 32 |", "| **total** | 4 |",
		"| unreached | 1 | 0 |", "| 1 | 1 | 1297 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkDirDelta is the cost of writing one directory object as a delta
// to its previous version (a 100-entry directory, one entry changed) with
// a new encoder per base, as a checkpoint would: docs/storage.md cites it.
func BenchmarkDirDelta(b *testing.B) {
	dir := &cas.Inode{Ino: 5, Mode: cas.ModeDir | 0o755}
	for i := range 100 {
		dir.Entries = append(dir.Entries, cas.Entry{Name: fmt.Sprintf("f%02d.txt", i), Ino: uint64(100 + i), Object: cas.Sum([]byte{byte(i)})})
	}
	base := cas.EncodeInode(dir)
	dir.Entries[37].Object = cas.Sum([]byte("changed"))
	next := cas.EncodeInode(dir)
	b.SetBytes(int64(len(next)))
	for b.Loop() {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(1), zstd.WithEncoderDictRaw(1, base), zstd.WithWindowSize(1<<16), zstd.WithLowerEncoderMem(true))
		if err != nil {
			b.Fatal(err)
		}
		if z := e.EncodeAll(next, nil); len(z) > 200 {
			b.Fatalf("delta of %d bytes", len(z))
		}
	}
}

// The entry delta of a directory with one entry changed costs the header
// and that entry, not the directory.
func TestCheapDelta(t *testing.T) {
	dir := &cas.Inode{Ino: 5, Mode: cas.ModeDir | 0o755, Mtime: 1}
	for i := range 100 {
		dir.Entries = append(dir.Entries, cas.Entry{Name: fmt.Sprintf("f%02d.txt", i), Ino: uint64(100 + i), Object: cas.Sum([]byte{byte(i)})})
	}
	base := cas.EncodeInode(dir)
	dir.Entries[37].Object = cas.Sum([]byte("changed"))
	dir.Mtime = 2
	c, err := newCompressor()
	if err != nil {
		t.Fatal(err)
	}
	if n := c.cheapDelta(cas.EncodeInode(dir), base); n > 64 {
		t.Fatalf("entry delta of one changed entry is %d bytes", n)
	}
	if n := c.trimDelta(cas.EncodeInode(dir), base); n < 1000 {
		t.Fatalf("trim delta %d bytes: the mtime in front should keep it from trimming the entries before the change", n)
	}
}

// A chunk with two 4 KiB pages rewritten in place costs those two pages as
// a block delta, where trimming keeps everything between them.
func TestBlockDelta(t *testing.T) {
	base := randomBytes(64<<10, 5)
	next := append([]byte{}, base...)
	copy(next[4<<10:], randomBytes(4<<10, 6))
	copy(next[60<<10:], randomBytes(4<<10, 7))
	c, err := newCompressor()
	if err != nil {
		t.Fatal(err)
	}
	if n := c.blockDelta(next, base); n < 8<<10 || n > 8<<10+64 {
		t.Fatalf("block delta %d bytes, want two pages", n)
	}
	if n := c.cheapDelta(next, base); n > 8<<10+64 {
		t.Fatalf("cheap delta %d bytes, want the block delta", n)
	}
	if n := c.trimDelta(next, base); n < 56<<10 {
		t.Fatalf("trim delta %d bytes, want the 56 KiB between the pages", n)
	}
}
