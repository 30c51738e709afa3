package cas

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// Format 4 logs whole blobs without their names, format 5 packs small
// ones: an index rebuilt from the log alone (a fresh Badger over the same
// segments) names every raw, compressed, packed and delta object again,
// and each reads back as written.
func TestReplayNamesBareBlobs(t *testing.T) {
	dir := t.TempDir()
	s, db := openTestLog(t, dir)
	noise := make([]byte, 9000)
	r := rand.New(rand.NewPCG(7, 1))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	text := bytes.Repeat([]byte("a line of source text\n"), 200)
	next := bytes.Clone(noise)
	next[4000] ^= 1
	text2 := bytes.Repeat([]byte("another line of source text\n"), 100)
	big := bytes.Repeat([]byte("a big chunk of text, compressed alone\n"), 1000)
	want := map[Hash][]byte{Sum(noise): noise, Sum(text): text, Sum(next): next, Sum(text2): text2, Sum(big): big}
	for _, f := range []*Frame{
		{Blobs: []Blob{{Hash: Sum(noise), Data: noise}}},
		{Blobs: []Blob{{Hash: Sum(text), Data: text}, {Hash: Sum(text2), Data: text2}}}, // packed
		{Blobs: []Blob{{Hash: Sum(next), Data: next, Base: Sum(noise)}}},
		{Blobs: []Blob{{Hash: Sum(big), Data: big}}},
	} {
		if _, _, err := s.Commit(f); err != nil {
			t.Fatal(err)
		}
	}
	kinds := map[byte]int{}
	err := LogEntries(filepath.Join(dir, "db.log"), func(e LogEntry) error {
		kinds[e.Kind]++
		return nil
	})
	if err != nil || kinds[entryBare] != 2 || kinds[entryPack] != 1 || kinds[entryDelta] != 1 || kinds[entryBlob] != 0 {
		t.Fatalf("log entries %v (%v), want 2 bare blobs, a pack and a delta", kinds, err)
	}
	if err := s.SyncLog(); err != nil {
		t.Fatal(err)
	}
	_ = s.CloseLog()
	_ = db.Close()
	if err := os.RemoveAll(filepath.Join(dir, "db")); err != nil {
		t.Fatal(err)
	}
	s, db = openTestLog(t, dir)
	defer db.Close()
	defer s.CloseLog()
	for h, data := range want {
		got, err := s.Get(h)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get %s after rebuilding the index from the log: %v", h.Short(), err)
		}
	}
}

// A bare blob whose bytes do not decompress, or decompress to another
// length than the entry says, is damage in the frame, not a torn tail.
func TestBareBlobThatDoesNotDecompress(t *testing.T) {
	enc, _, err := codecs()
	if err != nil {
		t.Fatal(err)
	}
	text := bytes.Repeat([]byte("xyz"), 1000)
	z := enc.EncodeAll(text, nil)
	for _, b := range []stored{
		{raw: 100, comp: compZstd, data: []byte("not zstd at all")},
		{raw: len(text) + 1, comp: compZstd, data: z},
		{raw: 5, comp: compRaw, data: []byte("four")},
	} {
		v, _ := encodeFrame(0, 0, []stored{b}, nil)
		_, _, err := decodePayload(v.bytes()[frameHeaderSize:])
		if !errors.Is(err, ErrDamaged) {
			t.Errorf("raw %d comp %d: decode = %v, want ErrDamaged", b.raw, b.comp, err)
		}
	}
	v, _ := encodeFrame(0, 0, []stored{{raw: len(text), comp: compZstd, data: z}}, nil)
	blobs, _, err := decodePayload(v.bytes()[frameHeaderSize:])
	if err != nil || len(blobs) != 1 || blobs[0].h != Sum(text) {
		t.Fatalf("a good bare blob: %v %v", blobs, err)
	}
}
