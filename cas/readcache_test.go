package cas

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// newLoggedStore opens a store with a segment log in dir (closed at the
// end of the test).
func newLoggedStore(t *testing.T, dir string) *Badger {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenLogged(db, filepath.Join(dir, "db.log"), LogOptions{ID: "0123456789abcdef0123456789abcdef", Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CatchUp(false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.CloseLog(); err != nil {
			t.Error(err)
		}
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// noise returns n incompressible bytes (stored raw).
func noise(seed uint64, n int) []byte {
	d := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 7))
	for i := range d {
		d[i] = byte(r.Uint32())
	}
	return d
}

func sameArray(a, b []byte) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

// ReadRange reads the wanted pages of an uncompressed object into the
// caller's buffer without caching them, remembers where the object is,
// and later reads of it need no index lookup; an unaligned range, or a
// compressed object, is read whole and cached.
func TestReadRangeReadsIntoBuffer(t *testing.T) {
	s := newLoggedStore(t, t.TempDir())
	data := noise(1, 64<<10-1000) // a short last page
	h, err := s.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	other := noise(4, 64<<10)
	ho, err := s.Put(other)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadRange(ho, 100, make([]byte, 4096))
	if err != nil || !bytes.Equal(got, other[100:4196]) {
		t.Fatalf("unaligned range: %v", err)
	}
	if !s.cache.contains(ho) {
		t.Fatal("an object read whole for an unaligned range is not cached")
	}

	dst := make([]byte, 64<<10)
	got, err = s.ReadRange(h, 0, dst)
	if err != nil || !bytes.Equal(got, data) || !sameArray(got, dst) {
		t.Fatalf("whole object: %v (equal %v, into the buffer %v)", err, bytes.Equal(got, data), sameArray(got, dst))
	}
	if s.cache.contains(h) {
		t.Fatal("an object read into the buffer is cached")
	}
	if _, ok := s.locs.get(h); !ok {
		t.Fatal("location not remembered")
	}
	// Later reads come from the remembered location: with the index
	// entry gone they would fail otherwise.
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(logKey(h)) }); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int{{0, 64 << 10}, {8192, 4096}, {8192, 3 * 4096}, {15 * 4096, 4096}, {16 * 4096, 4096}} {
		off, n := r[0], r[1]
		buf := make([]byte, n)
		got, err := s.ReadRange(h, off, buf)
		want := data[min(off, len(data)):min(off+n, len(data))]
		if err != nil || !bytes.Equal(got, want) || (len(want) > 0 && !sameArray(got, buf)) {
			t.Fatalf("range %d+%d: %v (equal %v)", off, n, err, bytes.Equal(got, want))
		}
	}
	if s.cache.contains(h) {
		t.Fatal("pages read into buffers are cached")
	}

	text := bytes.Repeat([]byte("package main // compressible\n"), 2000)
	ht, err := s.Put(text)
	if err != nil {
		t.Fatal(err)
	}
	got, err = s.ReadRange(ht, 0, make([]byte, 64<<10))
	if err != nil || !bytes.Equal(got, text) {
		t.Fatalf("compressed: %v", err)
	}
	if !s.cache.contains(ht) {
		t.Fatal("a decompressed object is not cached")
	}
}

// Damage to a segment after an object was read (and verified) once is
// still caught: the remembered CRC no longer matches, and the full check
// that follows reports ErrCorrupt, through ReadRange and Get alike. It would
// fail if a remembered location were trusted without a check.
func TestReadRangeCatchesLaterDamage(t *testing.T) {
	dir := t.TempDir()
	s := newLoggedStore(t, dir)
	data := noise(2, 64<<10)
	h, err := s.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 64<<10)
	if _, err := s.ReadRange(h, 0, dst); err != nil {
		t.Fatal(err)
	}
	e, ok := s.locs.get(h)
	if !ok {
		t.Fatal("location not remembered")
	}
	f, err := os.OpenFile(filepath.Join(dir, "db.log", segName(e.loc.Seg)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{data[100] ^ 0x40}, e.loc.Off+100); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadRange(h, 0, dst); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadRange of a damaged object: %v, want ErrCorrupt", err)
	}
	if _, err := s.ReadRange(h, 0, dst[:4096]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadRange of a damaged page: %v, want ErrCorrupt", err)
	}
	if _, err := s.Get(h); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Get of a damaged object: %v, want ErrCorrupt", err)
	}
}

// A deleted object is not found through a remembered location.
func TestReadRangeAfterDelete(t *testing.T) {
	s := newLoggedStore(t, t.TempDir())
	data := noise(3, 64<<10)
	h, err := s.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 64<<10)
	if _, err := s.ReadRange(h, 0, dst); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete([]Hash{h}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadRange(h, 0, dst); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadRange after Delete: %v, want ErrNotFound", err)
	}
	if _, err := s.Get(h); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
}

// Objects whose locations were remembered are read correctly after the
// compactor moved them and retired their segment, and the remembered
// locations then name the copies.
func TestReadRangeAcrossCompaction(t *testing.T) {
	s := newLoggedStore(t, t.TempDir())
	var all []Hash
	data := map[Hash][]byte{}
	for i := range 40 {
		d := noise(uint64(100+i), 256<<10) // 10 MiB in all, past minRollBytes
		h, err := s.Put(d)
		if err != nil {
			t.Fatal(err)
		}
		all, data[h] = append(all, h), d
	}
	dst := make([]byte, 256<<10)
	for _, h := range all {
		if _, err := s.ReadRange(h, 0, dst); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := s.locs.get(all[3])
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
	for _, h := range all[:10] {
		got, err := s.ReadRange(h, 0, dst)
		if err != nil || !bytes.Equal(got, data[h]) {
			t.Fatalf("ReadRange %s after compaction: %v", h.Short(), err)
		}
	}
	after, _ := s.locs.get(all[3])
	if after.loc.Seg == before.loc.Seg {
		t.Fatalf("remembered location still in segment %d after it was compacted", before.loc.Seg)
	}
	for _, h := range all[10:] {
		if _, err := s.ReadRange(h, 0, dst); !errors.Is(err, ErrNotFound) {
			t.Fatalf("swept object: %v, want ErrNotFound", err)
		}
	}
}

// The remembered locations stay within their bound.
func TestLocCacheBound(t *testing.T) {
	c := newLocCache(8)
	for i := range 100 {
		c.add(Hash{byte(i)}, locEntry{crcs: []uint32{uint32(i)}}, c.currentEpoch())
	}
	if n := c.len(); n != 8 {
		t.Fatalf("%d entries, want 8", n)
	}
	e := c.currentEpoch()
	c.forget([]Hash{{1}})
	c.add(Hash{200}, locEntry{}, e)
	if _, ok := c.get(Hash{200}); ok {
		t.Fatal("an entry looked up before a forget was added after it")
	}
}

// BenchmarkLoggedRead: reading a 64 KiB uncompressed chunk that is not in
// the object cache, as the store did before it remembered locations (an
// index lookup, a fresh buffer and a BLAKE3 hash per read: FullCheck), and
// as ReadRange does for a chunk read before (a pread into the caller's
// buffer and the pages' CRCs), whole and for one 4 KiB page. Run with
//
//	go test -run '^$' -bench LoggedRead ./cas
func BenchmarkLoggedRead(b *testing.B) {
	dir := b.TempDir()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")).WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	s, err := OpenLogged(db, filepath.Join(dir, "db.log"), LogOptions{ID: "0123456789abcdef0123456789abcdef", Create: true})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.CatchUp(false); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = s.CloseLog()
		_ = db.Close()
	})
	s.cache = newCache(0) // every read misses the object cache
	const count = 64
	hs := make([]Hash, count)
	for i := range hs {
		if hs[i], err = s.Put(noise(uint64(1000+i), ChunkSize)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("FullCheck", func(b *testing.B) {
		b.SetBytes(ChunkSize)
		i := 0
		for b.Loop() {
			h := hs[i%count]
			s.locs.forget([]Hash{h})
			if _, err := s.Get(h); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	for _, size := range []int{ChunkSize, pageSize} {
		b.Run(fmt.Sprintf("ReadRange%dKiB", size>>10), func(b *testing.B) {
			dst := make([]byte, size)
			for _, h := range hs {
				if _, err := s.Get(h); err != nil { // remembered now
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				if _, err := s.ReadRange(hs[i%count], 2*pageSize*(i%2), dst); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// Readers reading ranges of objects while a sweep deletes some of them and
// the compactor moves the rest and retires their segment always get the
// right bytes of a kept object, and of a swept one either its right
// bytes (a read that raced the sweep) or ErrNotFound.
func TestReadRangeDuringCompaction(t *testing.T) {
	s := newLoggedStore(t, t.TempDir())
	var all []Hash
	data := map[Hash][]byte{}
	for i := range 40 {
		d := noise(uint64(200+i), 256<<10)
		h, err := s.Put(d)
		if err != nil {
			t.Fatal(err)
		}
		all, data[h] = append(all, h), d
	}
	kept := map[Hash]bool{}
	for _, h := range all[:10] {
		kept[h] = true
	}
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			r := rand.New(rand.NewPCG(uint64(g), 9))
			buf := make([]byte, 64<<10)
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				h := all[r.IntN(len(all))]
				off := pageSize * r.IntN(64)
				n := pageSize * (1 + r.IntN(16))
				got, err := s.ReadRange(h, off, buf[:n])
				if err != nil && (kept[h] || !errors.Is(err, ErrNotFound)) {
					errs <- fmt.Errorf("read %s at %d: %w", h.Short(), off, err)
					return
				}
				if err == nil && !bytes.Equal(got, data[h][off:min(off+n, len(data[h]))]) {
					errs <- fmt.Errorf("read %s at %d: wrong bytes", h.Short(), off)
					return
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	s.BeginSweep()
	if _, err := s.Sweep(all[10:], nil); err != nil {
		t.Fatal(err)
	}
	s.EndSweep()
	res, err := s.Compact(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * retireDelay)
	close(stop)
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if res.Moved == 0 {
		t.Fatalf("the compaction moved nothing (%+v): the test needs it to", res)
	}
}
