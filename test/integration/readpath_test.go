package integration

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// The read path (cas/readcache.go): an object is verified by hash when the
// daemon first reads it, and later reads of its location check the CRC-32C
// of the pages they read. These tests read through the mount with the
// kernel's page cache of the file dropped before every read, so that each
// read reaches the daemon.

// readProject makes a project directory holding one file of random
// (incompressible, so stored raw) bytes, imported by the mount.
func readProject(t *testing.T, size int) (string, []byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	writeFile(t, filepath.Join(dir, "big"), data, 0o644)
	return dir, data
}

// preadUncached reads len(p) bytes at off from the open file f after
// dropping the file's pages from the kernel's cache, so the read goes to
// the daemon.
func preadUncached(t *testing.T, f *os.File, p []byte, off int64) (int, error) {
	t.Helper()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("fadvise DONTNEED: %v", err)
	}
	return f.ReadAt(p, off)
}

// TestReadPagesAfterFirstRead: whole reads, single pages, runs of pages,
// unaligned ranges and the short last page of a file read correctly once
// the daemon serves them from remembered locations.
func TestReadPagesAfterFirstRead(t *testing.T) {
	size := 3*cas.ChunkSize + 5000
	dir, data := readProject(t, size)
	mountProject(t, dir)
	f, err := os.Open(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all := make([]byte, size)
	for i := range 2 { // the first read verifies by hash, the second by CRC
		if n, err := preadUncached(t, f, all, 0); n != size || !bytes.Equal(all, data) {
			t.Fatalf("whole read %d: %d bytes, %v, equal %v", i, n, err, bytes.Equal(all, data))
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 60 {
		off := rng.IntN(size)
		n := 1 + rng.IntN(3*4096)
		if i%2 == 0 {
			off, n = off&^4095, 4096*(1+rng.IntN(3))
		}
		p := make([]byte, n)
		got, err := preadUncached(t, f, p, int64(off))
		want := data[off:min(off+n, size)]
		if got != len(want) || !bytes.Equal(p[:got], want) || (err != nil && !errors.Is(err, io.EOF)) {
			t.Fatalf("read of %d at %d: %d bytes, %v; equal %v", n, off, got, err, bytes.Equal(p[:got], want))
		}
	}
}

// TestReadDamageAfterFirstRead: damage to a chunk's bytes in its segment
// after a daemon read (and verified) them once is EIO for the next
// daemon's first read, for a whole read and for a read of just the
// damaged page, while the other pages and chunks read fine. A read path
// that trusted locations across daemons would return the damaged bytes.
// Within one daemon a chunk verified once is spliced from its segment
// without another check (cas/splice.go): damage made under a running
// daemon is then served, as by the go-fuse loopback, until the next
// mount or `reynfs fsck`.
func TestReadDamageAfterFirstRead(t *testing.T) {
	size := 4 * cas.ChunkSize
	dir, data := readProject(t, size)
	m := mountProject(t, dir)
	m.skipFsck = true // the test damages the store on purpose
	f, err := os.Open(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// No readahead: a read of an undamaged chunk must not bring in the
	// damaged one's pages too.
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM); err != nil {
		t.Fatal(err)
	}
	all := make([]byte, size)
	if n, err := preadUncached(t, f, all, 0); n != size || !bytes.Equal(all, data) {
		t.Fatalf("first read: %d bytes, %v", n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	m.Unmount()

	// Flip one byte of the third page of chunk 2 where the segment holds it.
	at := 2*cas.ChunkSize + 2*4096 + 100
	needle := data[at : at+64]
	segs, _ := filepath.Glob(filepath.Join(journal.LogPath(filepath.Join(m.Store, "db")), "*.seg"))
	found := false
	for _, s := range segs {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(b, needle)
		if i < 0 {
			continue
		}
		seg, err := os.OpenFile(s, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = seg.WriteAt([]byte{b[i] ^ 0x20}, int64(i))
		if cerr := seg.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		found = true
		break
	}
	if !found {
		t.Fatalf("the file's bytes are in none of the segments %v", segs)
	}
	m.Mount()
	f, err = os.Open(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM); err != nil {
		t.Fatal(err)
	}

	page := make([]byte, 4096)
	if _, err := preadUncached(t, f, page, int64(at&^4095)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read of the damaged page: %v, want EIO", err)
	}
	if _, err := preadUncached(t, f, all, 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("whole read of a file with a damaged chunk: %v, want EIO", err)
	}
	for _, off := range []int{0, cas.ChunkSize, 3 * cas.ChunkSize} {
		p := make([]byte, cas.ChunkSize)
		if n, err := preadUncached(t, f, p, int64(off)); n != len(p) || !bytes.Equal(p, data[off:off+len(p)]) {
			t.Fatalf("chunk at %d, undamaged: %d bytes, %v", off, n, err)
		}
	}
}
