package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

func testBlobs(n int, seed uint64) []cas.Blob {
	r := rand.New(rand.NewPCG(seed, 1))
	var out []cas.Blob
	for i := range n {
		var data []byte
		switch i % 3 {
		case 0: // compressible
			data = bytes.Repeat([]byte("reynfs "), 100+r.IntN(2000))
		case 1: // random: stored raw
			data = make([]byte, 1+r.IntN(70000))
			for j := range data {
				data[j] = byte(r.Uint32())
			}
		default: // tiny
			data = []byte{byte(i), byte(i >> 8)}
		}
		out = append(out, cas.Blob{Hash: cas.Sum(data), Data: data})
	}
	return out
}

// TestPackRoundTrip: every object comes back whole and verified, the
// index alone equals the one inside the pack, compressible objects are
// stored compressed and random ones raw, repeats stored once.
func TestPackRoundTrip(t *testing.T) {
	blobs := testBlobs(30, 1)
	blobs = append(blobs, blobs[4]) // a repeat
	pack, idx, id, err := BuildPack(KindData, blobs)
	if err != nil {
		t.Fatal(err)
	}
	if cas.Sum(pack).String() != id {
		t.Fatal("id is not the BLAKE3 of the pack")
	}
	x, err := OpenPack(id, pack)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := DecodeIndex(IndexKey(id), idx)
	if err != nil {
		t.Fatal(err)
	}
	if alone.DataSum != x.DataSum || len(alone.Entries) != len(x.Entries) {
		t.Fatal("the .idx is not the pack's index")
	}
	if !bytes.Equal(encodeIndex(x), idx) {
		t.Fatal("the index in the pack differs from the .idx")
	}
	if len(x.Entries) != 30 {
		t.Fatalf("%d entries, want 30 (one repeat)", len(x.Entries))
	}
	got, err := PackObjects(id, pack, x)
	if err != nil {
		t.Fatal(err)
	}
	want := map[cas.Hash][]byte{}
	for _, b := range blobs {
		want[b.Hash] = b.Data
	}
	for _, b := range got {
		if !bytes.Equal(want[b.Hash], b.Data) {
			t.Fatalf("object %s differs", b.Hash.Short())
		}
	}
	for i, b := range blobs[:30] {
		e, ok := x.Find(b.Hash)
		if !ok {
			t.Fatalf("Find(%s) failed", b.Hash.Short())
		}
		if wantZ := i%3 == 0; (e.Comp == compZstd) != wantZ {
			t.Errorf("object %d (%d bytes) compression %d", i, e.Raw, e.Comp)
		}
	}
}

// TestPackDamageNamed: a flipped byte anywhere in a pack or an index is
// reported as ErrCorrupt naming the key, never served.
func TestPackDamageNamed(t *testing.T) {
	pack, idx, id, err := BuildPack(KindTree, testBlobs(6, 2))
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{0, 9, len(pack) / 2, len(pack) - 70, len(pack) - 1} {
		bad := bytes.Clone(pack)
		bad[at] ^= 1
		if _, err := OpenPack(id, bad); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), PackKey(id)) {
			t.Errorf("pack flipped at %d: %v", at, err)
		}
	}
	for _, at := range []int{0, 8, 13, 20, len(idx) - 40, len(idx) - 1} {
		bad := bytes.Clone(idx)
		bad[at] ^= 1
		if _, err := DecodeIndex(IndexKey(id), bad); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), IndexKey(id)) {
			t.Errorf("index flipped at %d: %v", at, err)
		}
	}
	// An object's bytes that do not hash to its name (an index and pack
	// rebuilt consistently around them would pass every sum).
	x, err := OpenPack(id, pack)
	if err != nil {
		t.Fatal(err)
	}
	e := x.Entries[0]
	stored := bytes.Clone(pack[e.Off : e.Off+uint64(e.Stored)])
	stored[len(stored)-1] ^= 1
	if _, err := Object(PackKey(id), e, stored); !errors.Is(err, ErrCorrupt) {
		t.Errorf("damaged object: %v", err)
	}
}

func testRecords() []*journal.Record {
	h := cas.Sum([]byte("x"))
	return []*journal.Record{
		{Seq: 3, Op: journal.OpMkdir, Time: 5, Parent: 1, Name: "d", Ino: 2, Mode: 0o40755},
		{Seq: 4, Op: journal.OpData, Time: 6, Ino: 2, Size: 1, Chunks: []journal.Chunk{{Index: 0, Hash: h}}},
		{Seq: 9, Op: journal.OpGeneration, Time: 7, GenKind: "manual", Label: "l", Root: h, NextIno: 3},
	}
}

// TestSegmentRoundTrip: records come back equal, the key's range must
// match the content, and any flipped byte is a checksum error naming the
// key.
func TestSegmentRoundTrip(t *testing.T) {
	recs := testRecords()
	b, err := EncodeSegment(2, 10, recs)
	if err != nil {
		t.Fatal(err)
	}
	key := SegmentKey("w", 1, 2, 10)
	s, err := DecodeSegment("w", key, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Records) != len(recs) || s.First != 2 || s.Last != 10 || s.Epoch != 1 {
		t.Fatalf("decoded %+v", s)
	}
	for i, r := range s.Records {
		if !bytes.Equal(journal.Encode(r), journal.Encode(recs[i])) {
			t.Fatalf("record %d differs", i)
		}
	}
	if _, err := DecodeSegment("w", SegmentKey("w", 1, 2, 11), b); !errors.Is(err, ErrCorrupt) {
		t.Errorf("range other than the key's: %v", err)
	}
	for at := range b {
		bad := bytes.Clone(b)
		bad[at] ^= 0x20
		if _, err := DecodeSegment("w", key, bad); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), key) {
			t.Fatalf("flipped byte %d: %v", at, err)
		}
	}
	for _, c := range []struct {
		first, last uint64
	}{{4, 10}, {2, 8}, {0, 10}, {5, 4}} {
		if _, err := EncodeSegment(c.first, c.last, recs); err == nil {
			t.Errorf("EncodeSegment(%d, %d) took records 3, 4, 9", c.first, c.last)
		}
	}
	for _, k := range []string{"ws/w/seg/1-02-10.seg", "ws/w/seg/1-2-10", "ws/w/seg/0-2-10.seg", "ws/w/seg/1-3-2.seg", "ws/v/seg/1-2-10.seg", "ws/w/seg/1-2-10-3.seg",
		"ws/w/seg/1-2-10-00112233445566.seg", "ws/w/seg/1-2-10-00112233445566AA.seg", "ws/w/seg/1-2-10-0011223344556677-1.seg"} {
		if _, _, _, ok := ParseSegmentKey("w", k); ok {
			t.Errorf("ParseSegmentKey took %q", k)
		}
	}
	k1, err := saltedSegmentKey("w", 3, 2, 10)
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := saltedSegmentKey("w", 3, 2, 10)
	for _, k := range []string{k1, SegmentKey("w", 3, 2, 10)} {
		if e, first, last, ok := ParseSegmentKey("w", k); !ok || e != 3 || first != 2 || last != 10 {
			t.Errorf("ParseSegmentKey(%q) = %d, %d, %d, %v", k, e, first, last, ok)
		}
	}
	if k1 == k2 {
		t.Errorf("two writes of a segment share the key %s", k1)
	}
}

func testHead() *Head {
	return &Head{Format: Format, Seq: 12, Floor: 1, Epochs: []Epoch{{1, 1}, {2, 9}},
		Holder: Holder{Host: "h", Pid: 7, Store: "abc"}, Expires: time.Unix(1700000000, 5).UTC()}
}

// TestHeadExact: HEAD and the config decode only from their canonical
// encoding and only when consistent.
func TestHeadExact(t *testing.T) {
	h := testHead()
	b := h.Encode()
	got, err := DecodeHead("ws/w/HEAD", b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Encode(), b) || got.EpochOf(8) != 1 || got.EpochOf(9) != 2 || got.Epoch() != 2 {
		t.Fatalf("round trip: %s", got.Encode())
	}
	bad := map[string]func(h *Head){
		"floor 0":        func(h *Head) { h.Floor = 0 },
		"floor past seq": func(h *Head) { h.Floor = 14 },
		"no epochs":      func(h *Head) { h.Epochs = nil },
		"epoch order":    func(h *Head) { h.Epochs[1].Epoch = 1 },
		"first order":    func(h *Head) { h.Epochs[1].First = 1 },
		"first not 1":    func(h *Head) { h.Epochs[0].First = 2 },
		"no holder":      func(h *Head) { h.Holder.Store = "" },
		"format":         func(h *Head) { h.Format = 2 },
		"parent":         func(h *Head) { h.Parent = &Parent{WS: "p"} },
		"dropped 0":      func(h *Head) { h.Dropped = &Dropped{Gens: 0, Below: 3} },
		"dropped past":   func(h *Head) { h.Dropped = &Dropped{Gens: 2, Below: 14} },
	}
	for name, f := range bad {
		h := testHead()
		f(h)
		if _, err := DecodeHead("ws/w/HEAD", h.Encode()); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	for _, s := range []string{
		strings.Replace(string(b), `"seq":12`, `"seq": 12`, 1),
		strings.Replace(string(b), `{`, `{"extra":1,`, 1),
		string(b) + "{}",
		strings.TrimSuffix(string(b), "\n"),
	} {
		if _, err := DecodeHead("ws/w/HEAD", []byte(s)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%q: %v", s, err)
		}
	}
	c, err := newConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeConfig(c.Encode()); err != nil || *got != *c {
		t.Fatalf("config round trip: %v", err)
	}
	for _, s := range []string{`{"format":2,"id":"` + c.ID + `"}` + "\n", `{"format":1,"id":"AB"}` + "\n", `{"format":1}` + "\n"} {
		if _, err := DecodeConfig([]byte(s)); err == nil {
			t.Errorf("config %q decoded", s)
		}
	}
}

// The decoders accept exactly what the encoders write.
func FuzzDecodeIndex(f *testing.F) {
	_, idx, _, err := BuildPack(KindData, testBlobs(4, 3))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(idx)
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := DecodeIndex("k", b)
		if err == nil && !bytes.Equal(encodeIndex(x), b) {
			t.Fatal("DecodeIndex took a non-canonical index")
		}
	})
}

func FuzzDecodeSegment(f *testing.F) {
	b, err := EncodeSegment(2, 10, testRecords())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	key := SegmentKey("w", 1, 2, 10)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSegment("w", key, b)
		if err != nil {
			return
		}
		again, err := EncodeSegment(s.First, s.Last, s.Records)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("DecodeSegment took a non-canonical segment: %v", err)
		}
	})
}

func FuzzDecodeHead(f *testing.F) {
	f.Add(testHead().Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHead("k", b)
		if err == nil && !bytes.Equal(h.Encode(), b) {
			t.Fatal("DecodeHead took a non-canonical HEAD")
		}
	})
}

// buildPackV1 builds a pack as reynfs wrote them before packs had salt
// (RFSPACK1, RFSIDX01, objects from offset 9), raw objects only.
func buildPackV1(kind byte, blobs []cas.Blob) (pack []byte, id string) {
	x := &Index{Kind: kind, V1: true}
	pack = append([]byte(packMagicV1), kind)
	for _, b := range blobs { // sorted by the caller
		x.Entries = append(x.Entries, IndexEntry{Hash: b.Hash, Off: uint64(len(pack)), Stored: uint32(len(b.Data)), Raw: uint32(len(b.Data))})
		pack = append(pack, b.Data...)
	}
	x.DataSum = cas.Sum(pack)
	idx := encodeIndex(x)
	pack = append(pack, idx...)
	pack = binary.BigEndian.AppendUint32(pack, uint32(len(idx)))
	return pack, cas.Sum(pack).String()
}

// TestPackSaltAndV1: two packs of the same objects have different names
// (the salt: a re-sent condemned pack never takes the key remote GC
// deletes), and a pack written before the salt still opens, with its
// objects and its index file decoded.
func TestPackSaltAndV1(t *testing.T) {
	blobs := []cas.Blob{}
	for i := range 3 {
		d := []byte(strings.Repeat(string(rune('a'+i)), 100+i))
		blobs = append(blobs, cas.Blob{Hash: cas.Sum(d), Data: d})
	}
	slices.SortFunc(blobs, func(a, b cas.Blob) int { return bytes.Compare(a.Hash[:], b.Hash[:]) })
	p1, _, id1, err := BuildPack(KindData, blobs)
	if err != nil {
		t.Fatal(err)
	}
	_, _, id2, err := BuildPack(KindData, blobs)
	if err != nil {
		t.Fatal(err)
	}
	if id1 == id2 {
		t.Fatalf("two packs of the same objects are both named %s", id1)
	}
	if x, err := OpenPack(id1, p1); err != nil || x.V1 || len(x.Entries) != 3 || x.Entries[0].Off != uint64(packHeader) {
		t.Fatalf("OpenPack of a salted pack: %+v, %v", x, err)
	}
	old, id := buildPackV1(KindData, blobs)
	x, err := OpenPack(id, old)
	if err != nil || !x.V1 || x.Entries[0].Off != uint64(packHeaderV1) {
		t.Fatalf("OpenPack of a pack without salt: %+v, %v", x, err)
	}
	got, err := PackObjects(id, old, x)
	if err != nil || len(got) != 3 || !bytes.Equal(got[2].Data, blobs[2].Data) {
		t.Fatalf("objects of a pack without salt: %v", err)
	}
	n := binary.BigEndian.Uint32(old[len(old)-4:])
	if _, err := DecodeIndex("packs/x.idx", old[len(old)-4-int(n):len(old)-4]); err != nil {
		t.Fatalf("index file of a pack without salt: %v", err)
	}
	// A V1 index does not describe a salted pack.
	idx := old[len(old)-4-int(n) : len(old)-4]
	forged := append(append(slices.Clone(p1[:len(p1)-4-int(binary.BigEndian.Uint32(p1[len(p1)-4:]))]), idx...), old[len(old)-4:]...)
	if _, err := OpenPack(cas.Sum(forged).String(), forged); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a salted pack with an unsalted index = %v, want ErrCorrupt", err)
	}
}
