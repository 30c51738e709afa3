package cas

import (
	"errors"
	"slices"
	"testing"
)

// tree is a small store with two generations that share a subtree.
type tree struct {
	s            *Memory
	gen1, gen2   Hash
	c1, c2, c3   Hash // chunks
	sub, shadow  Hash // the shared subdirectory; a fifo whose bytes are also a chunk
	fileA, fileB Hash
}

func put(t *testing.T, s Store, data []byte) Hash {
	t.Helper()
	h, err := s.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func putInode(t *testing.T, s Store, in *Inode) Hash {
	t.Helper()
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	return put(t, s, EncodeInode(in))
}

func newTree(t *testing.T) *tree {
	s := NewMemory()
	tr := &tree{s: s}
	tr.c1 = put(t, s, []byte("chunk one"))
	tr.c2 = put(t, s, []byte("chunk two"))
	tr.c3 = put(t, s, []byte("chunk three"))
	fifo := &Inode{Ino: 9, Mode: ModeFifo | 0o644}
	tr.shadow = putInode(t, s, fifo)
	// A file whose only chunk is, byte for byte, the fifo's inode object.
	copyOfFifo := putInode(t, s, &Inode{Ino: 8, Mode: ModeRegular | 0o644,
		Size: uint64(len(EncodeInode(fifo))), Chunks: []Hash{tr.shadow}})
	tr.fileA = putInode(t, s, &Inode{Ino: 3, Mode: ModeRegular | 0o644,
		Size: 3 * ChunkSize, Chunks: []Hash{tr.c1, Zero, tr.c2}})
	link := putInode(t, s, &Inode{Ino: 4, Mode: ModeSymlink | 0o777, Size: 1, Target: "a"})
	tr.sub = putInode(t, s, &Inode{Ino: 2, Mode: ModeDir | 0o755, Entries: []Entry{
		{Name: "a", Ino: 3, Object: tr.fileA},
		{Name: "a-hardlink", Ino: 3, Object: tr.fileA},
		{Name: "l", Ino: 4, Object: link},
	}})
	tr.fileB = putInode(t, s, &Inode{Ino: 5, Mode: ModeRegular | 0o600,
		Size: 2 * ChunkSize, Chunks: []Hash{tr.c2, tr.c3}})
	tr.gen1 = putInode(t, s, &Inode{Ino: 1, Mode: ModeDir | 0o755, Entries: []Entry{
		{Name: "copy", Ino: 8, Object: copyOfFifo},
		{Name: "pipe", Ino: 9, Object: tr.shadow},
		{Name: "sub", Ino: 2, Object: tr.sub},
	}})
	tr.gen2 = putInode(t, s, &Inode{Ino: 1, Mode: ModeDir | 0o755, Mtime: 1, Entries: []Entry{
		{Name: "b", Ino: 5, Object: tr.fileB},
		{Name: "sub", Ino: 2, Object: tr.sub},
	}})
	return tr
}

type visitKey struct {
	h     Hash
	chunk bool
}

func TestWalkVisitsEachObjectOnce(t *testing.T) {
	tr := newTree(t)
	seen := make(map[visitKey]int)
	var order []uint64
	err := Walk(tr.s, []Hash{tr.gen1, tr.gen2, tr.gen1}, func(h Hash, in *Inode) error {
		seen[visitKey{h, in == nil}]++
		if in != nil {
			if in.Hash() != h {
				t.Errorf("visit %s with an inode hashing to %s", h.Short(), in.Hash().Short())
			}
			order = append(order, in.Ino)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s (chunk %v) visited %d times", k.h.Short(), k.chunk, n)
		}
	}
	// 2 roots + copy, pipe, sub, a, l, b = 8 inode objects; c1 c2 c3 and the
	// fifo's bytes as a chunk = 4 chunks; the hole is not an object. The
	// fifo's object is stored once and visited twice.
	if len(seen) != 12 || tr.s.Len() != 11 {
		t.Fatalf("%d visits of %d objects, want 12 of 11", len(seen), tr.s.Len())
	}
	if seen[visitKey{tr.shadow, true}] != 1 || seen[visitKey{tr.shadow, false}] != 1 {
		t.Fatal("a hash that is both a chunk and an inode object must be visited as each")
	}
	if seen[visitKey{Zero, true}] != 0 {
		t.Fatal("the hole was visited")
	}
	if want := []uint64{1, 8, 9, 2, 3, 4, 1, 5}; !slices.Equal(order, want) {
		t.Fatalf("inode order %v, want %v (pre-order, by name)", order, want)
	}
}

func TestWalkErrors(t *testing.T) {
	tr := newTree(t)
	stop := errors.New("stop")
	err := Walk(tr.s, []Hash{tr.gen1}, func(h Hash, in *Inode) error {
		if h == tr.sub {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("visit error: got %v", err)
	}
	if err := Walk(tr.s, []Hash{Sum([]byte("nope"))}, func(Hash, *Inode) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing root: got %v, want ErrNotFound", err)
	}
	if err := Walk(tr.s, []Hash{tr.c1}, func(Hash, *Inode) error { return nil }); !errors.Is(err, ErrInvalidInode) {
		t.Fatalf("chunk as a root: got %v, want ErrInvalidInode", err)
	}
	tr.s.Corrupt(tr.sub)
	if err := Walk(tr.s, []Hash{tr.gen2}, func(Hash, *Inode) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt subtree: got %v, want ErrCorrupt", err)
	}
}

func TestWalkDoesNotReadChunks(t *testing.T) {
	tr := newTree(t)
	if err := tr.s.Delete([]Hash{tr.c1, tr.c2, tr.c3}); err != nil {
		t.Fatal(err)
	}
	if err := Walk(tr.s, []Hash{tr.gen1, tr.gen2}, func(Hash, *Inode) error { return nil }); err != nil {
		t.Fatalf("Walk read a chunk: %v", err)
	}
}

func TestVerify(t *testing.T) {
	tr := newTree(t)
	n, err := Verify(tr.s, []Hash{tr.gen1, tr.gen2})
	if err != nil || n != 12 {
		t.Fatalf("Verify of a sound store = %d, %v; want 12, nil", n, err)
	}
	tr.s.Corrupt(tr.c3)
	if err := tr.s.Delete([]Hash{tr.c1}); err != nil {
		t.Fatal(err)
	}
	n, err = Verify(tr.s, []Hash{tr.gen1, tr.gen2})
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrNotFound) || n != 12 {
		t.Fatalf("Verify = %d, %v; want 12 checked with ErrCorrupt and ErrNotFound", n, err)
	}
	// A corrupt directory is reported and its subtree skipped; the rest is checked.
	tr = newTree(t)
	tr.s.Corrupt(tr.sub)
	n, err = Verify(tr.s, []Hash{tr.gen1, tr.gen2})
	if !errors.Is(err, ErrCorrupt) || n != 12-3 { // sub's a, l and chunk c1 are out of reach
		t.Fatalf("Verify with a corrupt directory = %d, %v", n, err)
	}
}
