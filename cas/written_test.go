package cas

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A chunk a commit stores as a delta of the bytes its writer handed in
// (Blob.BaseData: the live tree's read-modify-write) is remembered as a
// verified read would remember it, so its next read walks the chain from
// remembered locations and checks the CRCs instead of the hash; damage to
// a link after the write is still ErrCorrupt, for the version on top and
// the damaged one. The first check fails on code that does not remember
// written deltas, the rest on code that trusts what it remembered.
func TestWrittenDeltaRemembered(t *testing.T) {
	dir := t.TempDir()
	s := newLoggedStore(t, dir)
	base := noise(11, ChunkSize)
	hb, err := s.Put(base)
	if err != nil {
		t.Fatal(err)
	}
	vs, hs := [][]byte{base}, []Hash{hb}
	for i := range 2 {
		v := bytes.Clone(vs[len(vs)-1])
		copy(v[(3+i)*4096:], noise(uint64(20+i), 4096))
		h := Sum(v)
		if err := s.PutBatch([]Blob{{Hash: h, Data: v, Base: hs[len(hs)-1], BaseData: vs[len(vs)-1]}}); err != nil {
			t.Fatal(err)
		}
		vs, hs = append(vs, v), append(hs, h)
	}
	s.cache.remove(hs)
	for i, h := range hs[1:] {
		l, ok := s.locs.link(h) // version 1 is a link of version 2's chain
		if !ok || l.Comp != compDelta {
			t.Fatalf("version %d: written delta not remembered (%v %+v)", i+1, ok, l)
		}
	}
	for i, h := range hs {
		got, err := s.Get(h)
		if err != nil || !bytes.Equal(got, vs[i]) {
			t.Fatalf("version %d: %v", i, err)
		}
	}
	s.cache.remove(hs)

	// Damage the first delta's last byte (inserted data) in its segment.
	e, _ := s.locs.get(hs[1])
	f, err := os.OpenFile(filepath.Join(dir, "db.log", segName(e.loc.Seg)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := e.loc.Off + int64(e.loc.Stored) - 1
	var b [1]byte
	if _, err := f.ReadAt(b[:], at); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{b[0] ^ 0x40}, at); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range hs[1:] {
		if _, err := s.Get(h); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Get %s over a damaged link: %v, want ErrCorrupt", h.Short(), err)
		}
	}
	if got, err := s.Get(hb); err != nil || !bytes.Equal(got, base) {
		t.Fatalf("the base below the damage: %v", err)
	}
}

// undeltaInPlace makes what Undelta makes of an edit in place (a shift
// of random bytes is one too: Delta makes it one insert), and leaves the
// buffer alone for any other delta (a length change, a cut one), which
// undelta then applies between buffers.
func TestUndeltaInPlace(t *testing.T) {
	base := noise(31, ChunkSize)
	inPlace := bytes.Clone(base)
	copy(inPlace[8192:], noise(32, 4096))
	copy(inPlace[ChunkSize-100:], noise(33, 100))
	shifted := append(bytes.Clone(base[1:]), 7)
	longer := append(bytes.Clone(base), 1, 2, 3)
	for _, c := range []struct {
		name   string
		target []byte
		want   bool
	}{{"in place", inPlace, true}, {"shifted", shifted, false}, {"copies shifted", append([]byte{9}, bytes.Repeat([]byte("0123456789abcdef"), ChunkSize/16-1)...), false}, {"longer", longer, false}, {"same", base, true}} {
		d := Delta(base, c.target)
		buf := bytes.Clone(base)
		got := undeltaInPlace(buf, d)
		if c.want && !got || c.name == "longer" && got {
			t.Fatalf("%s: in place %v, want %v", c.name, got, c.want)
		}
		if got && !bytes.Equal(buf, c.target) {
			t.Fatalf("%s: wrong bytes", c.name)
		}
		if !got && !bytes.Equal(buf, base) {
			t.Fatalf("%s: buffer changed", c.name)
		}
	}
	d := Delta(base, inPlace)
	for cut := 1; cut < len(d); cut += 97 {
		buf := bytes.Clone(base)
		if undeltaInPlace(buf, d[:cut]) || !bytes.Equal(buf, base) {
			t.Fatalf("a delta cut at %d of %d applied", cut, len(d))
		}
	}
}
