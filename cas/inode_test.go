package cas

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// testInodes returns one valid inode of each interesting shape.
func testInodes() map[string]*Inode {
	chunkA, chunkB := Sum([]byte("a")), Sum([]byte("b"))
	file := &Inode{
		Ino: 12, Mode: ModeRegular | 0o644, Uid: 1000, Gid: 1000,
		Size:  2*ChunkSize + 5,
		Atime: 1_700_000_000_000_000_001, Mtime: -5, Ctime: 0,
		Xattrs: []Xattr{{Name: "user.a", Value: []byte{0, 1, 2}}, {Name: "user.b"}},
		Chunks: []Hash{chunkA, Zero, chunkB},
	}
	link := &Inode{Ino: 13, Mode: ModeSymlink | 0o777, Size: 9, Target: "../a/b/cd"}
	fifo := &Inode{Ino: 14, Mode: ModeFifo | 0o600, Uid: 1<<32 - 1}
	dev := &Inode{Ino: 15, Mode: ModeChar | 0o666, Rdev: 1<<8 | 3}
	empty := &Inode{Ino: 16, Mode: ModeRegular | 0o4755}
	dir := &Inode{
		Ino: 1, Mode: ModeDir | 0o1777, Mtime: 42,
		Entries: []Entry{
			{Name: "a.txt", Ino: 12, Object: file.Hash()},
			{Name: "hardlink", Ino: 12, Object: file.Hash()},
			{Name: "link", Ino: 13, Object: link.Hash()},
			{Name: "pipe", Ino: 14, Object: fifo.Hash()},
			{Name: "tty", Ino: 15, Object: dev.Hash()},
			{Name: "zero", Ino: 16, Object: empty.Hash()},
		},
	}
	emptyDir := &Inode{Ino: 2, Mode: ModeDir | 0o755}
	return map[string]*Inode{
		"file": file, "symlink": link, "fifo": fifo, "chardev": dev,
		"emptyfile": empty, "dir": dir, "emptydir": emptyDir,
	}
}

func TestInodeRoundTrip(t *testing.T) {
	for name, in := range testInodes() {
		t.Run(name, func(t *testing.T) {
			if err := in.Validate(); err != nil {
				t.Fatal(err)
			}
			b := EncodeInode(in)
			if b[0] != inodeV1 {
				t.Fatalf("first byte %#x, want %#x", b[0], inodeV1)
			}
			got, err := DecodeInode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, in) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, in)
			}
			if got.Hash() != in.Hash() || in.Hash() != Sum(b) {
				t.Fatal("hash differs after round trip")
			}
		})
	}
}

func TestInodeDeterministic(t *testing.T) {
	a, b := testInodes(), testInodes()
	for name := range a {
		if !bytes.Equal(EncodeInode(a[name]), EncodeInode(b[name])) {
			t.Errorf("%s: two encodings of equal inodes differ", name)
		}
	}
	// A change to any field changes the hash.
	in := testInodes()["file"]
	h := in.Hash()
	in.Mtime++
	if in.Hash() == h {
		t.Fatal("mtime change kept the hash")
	}
}

func TestInodeDecodeDoesNotAlias(t *testing.T) {
	b := EncodeInode(testInodes()["file"])
	in, err := DecodeInode(b)
	if err != nil {
		t.Fatal(err)
	}
	in.Xattrs[0].Value[0] = 99
	if !bytes.Equal(b, EncodeInode(testInodes()["file"])) {
		t.Fatal("decoded inode aliases the input bytes")
	}
}

func TestInodeRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(in map[string]*Inode) *Inode
	}{
		{"ino zero", func(m map[string]*Inode) *Inode { m["fifo"].Ino = 0; return m["fifo"] }},
		{"no type", func(m map[string]*Inode) *Inode { m["fifo"].Mode = 0o644; return m["fifo"] }},
		{"mode too big", func(m map[string]*Inode) *Inode { m["fifo"].Mode |= 1 << 20; return m["fifo"] }},
		{"too few chunks", func(m map[string]*Inode) *Inode {
			m["file"].Chunks = m["file"].Chunks[:2]
			return m["file"]
		}},
		{"too many chunks", func(m map[string]*Inode) *Inode {
			m["file"].Size = 2 * ChunkSize
			return m["file"]
		}},
		{"unsorted xattrs", func(m map[string]*Inode) *Inode {
			x := m["file"].Xattrs
			x[0], x[1] = x[1], x[0]
			return m["file"]
		}},
		{"duplicate xattr", func(m map[string]*Inode) *Inode {
			m["file"].Xattrs[1].Name = m["file"].Xattrs[0].Name
			return m["file"]
		}},
		{"unsorted entries", func(m map[string]*Inode) *Inode {
			e := m["dir"].Entries
			e[0], e[1] = e[1], e[0]
			return m["dir"]
		}},
		{"duplicate entry", func(m map[string]*Inode) *Inode {
			m["dir"].Entries[1].Name = m["dir"].Entries[0].Name
			return m["dir"]
		}},
		{"slash in name", func(m map[string]*Inode) *Inode {
			m["dir"].Entries[0].Name = "a/b"
			return m["dir"]
		}},
		{"dotdot", func(m map[string]*Inode) *Inode { m["dir"].Entries[0].Name = ".."; return m["dir"] }},
		{"long name", func(m map[string]*Inode) *Inode {
			m["dir"].Entries[len(m["dir"].Entries)-1].Name = "zz" + strings.Repeat("x", 254)
			return m["dir"]
		}},
		{"entry without object", func(m map[string]*Inode) *Inode {
			m["dir"].Entries[0].Object = Zero
			return m["dir"]
		}},
		{"dir with size", func(m map[string]*Inode) *Inode { m["dir"].Size = 4096; return m["dir"] }},
		{"symlink size", func(m map[string]*Inode) *Inode { m["symlink"].Size = 3; return m["symlink"] }},
		{"empty symlink", func(m map[string]*Inode) *Inode {
			m["symlink"].Target, m["symlink"].Size = "", 0
			return m["symlink"]
		}},
		{"fifo with size", func(m map[string]*Inode) *Inode { m["fifo"].Size = 1; return m["fifo"] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.mutate(testInodes())
			if err := in.Validate(); !errors.Is(err, ErrInvalidInode) {
				t.Fatalf("Validate = %v, want ErrInvalidInode", err)
			}
			if _, err := DecodeInode(EncodeInode(in)); !errors.Is(err, ErrInvalidInode) {
				t.Fatalf("DecodeInode = %v, want ErrInvalidInode", err)
			}
		})
	}
}

func TestInodeDecodeRejectsBytes(t *testing.T) {
	good := EncodeInode(testInodes()["dir"])
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"wrong magic", append([]byte{0xA2}, good[1:]...)},
		{"trailing byte", append(append([]byte{}, good...), 0)},
		{"truncated", good[:len(good)-1]},
		{"non-minimal uvarint", append([]byte{inodeV1, 0x81, 0x00}, good[2:]...)},
		{"uid overflows", []byte{inodeV1, 1, 0x80, 0x80, 0x04, 0x80, 0x80, 0x80, 0x80, 0x10}},
		{"huge count", []byte{inodeV1, 1, 0x80, 0x80, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeInode(tc.b); !errors.Is(err, ErrInvalidInode) {
				t.Fatalf("DecodeInode = %v, want ErrInvalidInode", err)
			}
		})
	}
}

func TestChunkCount(t *testing.T) {
	for size, want := range map[uint64]uint64{
		0: 0, 1: 1, ChunkSize - 1: 1, ChunkSize: 1, ChunkSize + 1: 2,
		1<<64 - 1: (1<<64-1)/ChunkSize + 1,
	} {
		if got := ChunkCount(size); got != want {
			t.Errorf("ChunkCount(%d) = %d, want %d", size, got, want)
		}
	}
}
