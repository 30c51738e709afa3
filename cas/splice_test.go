package cas

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// spliceOut splices n bytes of h from off into a fresh pipe and returns
// what the pipe then holds.
func spliceOut(t *testing.T, s *Badger, h Hash, off, n int) ([]byte, error) {
	t.Helper()
	return pipeOut(t, func(fd int) error {
		sp, ok := s.Spliceable(h)
		if !ok {
			return errNoSplice
		}
		return s.SpliceSpan(sp, off, n, fd)
	})
}

// pipeOut runs fill with the write end of a fresh pipe and returns what
// the pipe then holds.
func pipeOut(t *testing.T, fill func(fd int) error) ([]byte, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, 1<<20); err != nil {
		t.Fatal(err)
	}
	serr := fill(int(w.Fd()))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b, serr
}

// An object becomes spliceable once it was read and verified, and a
// splice moves exactly the range asked for; a compressed object, an
// unread one and a range past the object's end are never spliced.
func TestSpliceAfterFirstRead(t *testing.T) {
	s := newLoggedStore(t, t.TempDir())
	data := noise(21, 64<<10-1000)
	h, err := s.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	packed := bytes.Repeat([]byte("compressible "), 5000)
	hp, err := s.Put(packed)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Spliceable(h); ok {
		t.Fatal("an object never read (never verified) is spliceable")
	}
	if _, err := spliceOut(t, s, h, 0, 10); err == nil {
		t.Fatal("a splice of an object never verified succeeded")
	}
	if _, err := s.Get(h); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(hp); err != nil {
		t.Fatal(err)
	}
	if sp, ok := s.Spliceable(h); !ok || sp.Len() != len(data) {
		t.Fatalf("after a verified read: Spliceable = %d, %v", sp.Len(), ok)
	}
	if _, ok := s.Spliceable(hp); ok {
		t.Fatal("a compressed object is spliceable")
	}
	for _, r := range [][2]int{{0, len(data)}, {0, 4096}, {4096, 8192}, {100, 5000}, {len(data) - 7, 7}} {
		got, err := spliceOut(t, s, h, r[0], r[1])
		if err != nil || !bytes.Equal(got, data[r[0]:r[0]+r[1]]) {
			t.Fatalf("splice of %d at %d: %v, equal %v", r[1], r[0], err, bytes.Equal(got, data[r[0]:r[0]+r[1]]))
		}
	}
	if _, err := spliceOut(t, s, h, len(data)-7, 8); err == nil {
		t.Fatal("a splice past the object's end succeeded")
	}
}

// After the compactor moved an object and retired its segment, the
// object is not spliceable until it is read again, and a splice from a
// location remembered before the move (a reader that looked it up just
// before) fails instead of reading another file's bytes.
func TestSpliceAcrossCompaction(t *testing.T) {
	s := newLoggedStore(t, t.TempDir())
	var all []Hash
	data := map[Hash][]byte{}
	for i := range 40 {
		d := noise(uint64(200+i), 256<<10) // 10 MiB in all, past minRollBytes
		h, err := s.Put(d)
		if err != nil {
			t.Fatal(err)
		}
		all, data[h] = append(all, h), d
	}
	for _, h := range all {
		if _, err := s.Get(h); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := s.locs.get(all[3])
	before, ok := s.Spliceable(all[3]) // a reply that resolved it just before the move
	if !ok {
		t.Fatal("a verified object is not spliceable")
	}
	s.BeginSweep()
	if _, err := s.Sweep(all[10:], nil); err != nil {
		t.Fatal(err)
	}
	s.EndSweep()
	res, err := s.Compact(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments == 0 || res.Moved == 0 {
		t.Fatalf("the compaction moved nothing (%+v): the test needs it to", res)
	}
	time.Sleep(2 * retireDelay)
	if _, ok := s.Spliceable(all[3]); ok {
		t.Fatal("an object the compactor moved is still spliceable from its old place")
	}
	if got, err := pipeOut(t, func(fd int) error { return s.SpliceSpan(before, 0, 4096, fd) }); err == nil {
		t.Fatalf("splice from a span resolved before the move, its segment retired, succeeded (%d bytes)", len(got))
	}
	s.locs.add(all[3], old, s.locs.currentEpoch())
	if got, err := spliceOut(t, s, all[3], 0, 4096); err == nil {
		t.Fatalf("splice from a retired segment succeeded (%d bytes)", len(got))
	}
	s.locs.forget([]Hash{all[3]})
	if _, _, err := s.get(all[3], nil); err != nil { // past the object cache
		t.Fatal(err)
	}
	got, err := spliceOut(t, s, all[3], 0, 256<<10)
	if err != nil || !bytes.Equal(got, data[all[3]]) {
		t.Fatalf("splice of the moved copy: %v", err)
	}
}
