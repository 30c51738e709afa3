package integration

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
)

// Reads of chunks the daemon verified before are spliced from the store's
// segment files into the FUSE reply (fs/splice.go, cas/splice.go). These
// tests drop the kernel's page cache of the file before every read, so
// that each read reaches the daemon, and read the same ranges before and
// after the chunks were verified.

// mountMaxRead returns the max_read option of the mount at dir.
func mountMaxRead(t *testing.T, dir string) int {
	t.Helper()
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[1] != dir {
			continue
		}
		for _, o := range strings.Split(fields[3], ",") {
			if v, ok := strings.CutPrefix(o, "max_read="); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
	}
	t.Fatalf("no max_read for %s in /proc/self/mounts", dir)
	return 0
}

// TestSplicedReads: whole reads, big and small ranges, unaligned ones and
// the short last chunk read the same before and after the chunks were
// verified (the later reads are spliced); bytes still in a write buffer,
// a hole punched into a spliced chunk's range, and a rewind to a version
// whose chunks were spliced before read right at once.
func TestSplicedReads(t *testing.T) {
	size := 20*cas.ChunkSize + 5000
	dir, data := readProject(t, size)
	m := mountProject(t, dir)
	if os.Geteuid() == 0 {
		// As root the mount is direct and READs are kept small enough
		// for go-fuse to splice (half the largest pipe).
		b, err := os.ReadFile("/proc/sys/fs/pipe-max-size")
		if err != nil {
			t.Fatal(err)
		}
		pipeMax, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if got := mountMaxRead(t, dir); got > pipeMax/2 {
			t.Fatalf("max_read %d: READs too big to splice through a pipe of %d", got, pipeMax)
		}
	}
	path := filepath.Join(dir, "big")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all := make([]byte, size)
	check := func(what string, want []byte) {
		t.Helper()
		if n, err := preadUncached(t, f, all[:len(want)], 0); n != len(want) || !bytes.Equal(all[:len(want)], want) {
			t.Fatalf("%s: whole read: %d bytes, %v, equal %v", what, n, err, bytes.Equal(all[:n], want))
		}
	}
	for i := range 3 { // the first read verifies by hash, the others splice
		check(fmt.Sprintf("read %d", i), data)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 40 {
		off := rng.IntN(size)
		n := 1 + rng.IntN(700<<10)
		p := make([]byte, n)
		got, err := preadUncached(t, f, p, int64(off))
		want := data[off:min(off+n, size)]
		if got != len(want) || !bytes.Equal(p[:got], want) || (err != nil && !errors.Is(err, io.EOF)) {
			t.Fatalf("read of %d at %d: %d bytes, %v; equal %v", n, off, got, err, bytes.Equal(p[:got], want))
		}
	}

	// A write, not yet journaled, among spliced chunks.
	v2 := bytes.Clone(data)
	copy(v2[5*cas.ChunkSize+100:], "written")
	if _, err := f.WriteAt([]byte("written"), 5*cas.ChunkSize+100); err != nil {
		t.Fatal(err)
	}
	check("after a write", v2)
	// A hole punched into chunk 7 (journaled on fsync).
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 7*cas.ChunkSize+4096, 3*4096); err != nil {
		t.Fatal(err)
	}
	clear(v2[7*cas.ChunkSize+4096 : 7*cas.ChunkSize+4*4096])
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	check("after a punched hole", v2)
	check("after a punched hole, again", v2)

	if r := m.Run("checkpoint", "--dir", m.Dir, "-m", "v2"); r.Code != 0 {
		t.Fatalf("checkpoint: %d %s", r.Code, r.Stderr)
	}
	v3 := bytes.Clone(v2)
	copy(v3[cas.ChunkSize:], bytes.Repeat([]byte{0x5a}, 3*cas.ChunkSize))
	if _, err := f.WriteAt(v3[cas.ChunkSize:4*cas.ChunkSize], cas.ChunkSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	check("v3", v3)
	check("v3, again", v3)
	if r := m.Run("rewind", "--dir", m.Dir, "v2"); r.Code != 0 {
		t.Fatalf("rewind: %d %s", r.Code, r.Stderr)
	}
	g, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	got := make([]byte, size)
	for i := range 2 {
		if n, err := preadUncached(t, g, got, 0); n != size || !bytes.Equal(got, v2) {
			t.Fatalf("read %d after the rewind: %d bytes, %v, equal to v2 %v, to v3 %v", i, n, err, bytes.Equal(got, v2), bytes.Equal(got, v3))
		}
	}
}
