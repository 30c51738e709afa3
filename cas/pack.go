package cas

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Packs (store format 5). Small objects compress badly one by one: a
// small file's chunk of a few KB gives zstd little history, and a file's
// inode object (72 bytes, 32 of them a chunk's name) nothing at all. The
// benchmark's store is 11,000 of each (docs/storage.md). So a commit
// whose frame carries two or more whole objects of at most packObjectMax
// bytes stores them together: up to packRawMax bytes of them, in frame
// order, as one pack entry, zstd-compressed as one. Related objects sit
// together in a frame (a checkpoint's inode objects, an import's files in
// tree order), so each compresses against its neighbours: 19 % less for
// the benchmark's chunks and 34 % for its file inodes than alone.
//
// A pack's raw bytes are the lengths of its objects (uvarints) and then
// the objects, concatenated. Its entry ('P': object count, raw length,
// stored length, the compressed bytes) names no object, like a bare
// blob's; a replay names each by hashing it. Each object's index entry
// is the pack's location (Comp compPack) plus where the object is in the
// raw pack (In) and the raw pack's length (PackRaw). A read decompresses
// the whole pack (at most packRawMax) once into a small cache of packs,
// cuts the object out and, like every read from disk, checks its hash.
//
// The sweep deletes index entries as for any object; a pack's bytes stay
// while any of its objects is live, and the compactor copies the live
// ones out of a pack it retires (stored one by one) and counts a pack's
// bytes live in proportion to its live objects' lengths (Loc.share).

const (
	entryPack = 'P' // object count, raw length, stored length, bytes (format 5)
	compPack  = 3   // Loc only: the object is in the pack at Off (format 5)

	// packObjectMax is the largest object a pack takes: a small file's
	// chunk, an inode object. Larger chunks compress well alone.
	packObjectMax = 16 << 10
	// packRawMax bounds a pack's raw bytes, so a cold read of one small
	// object decompresses at most this much (about 20 µs).
	packRawMax = 64 << 10
	// packCacheSize is how many decompressed packs reads keep: a tree
	// walk reads a pack's objects one after the other.
	packCacheSize = 8
)

// packMember is one object of a pack being written.
type packMember struct {
	h       Hash
	off, n  int // where it is in the raw pack
	fromIdx int // its index in the frame's stored list before packing
}

// packSmall replaces runs of small whole objects in blobs (those marked
// small by Commit, stored raw so far) with packs, compressed with enc. A
// run of one, or a pack that zstd does not shrink by an eighth, is stored
// as Commit stores any object. It keeps the order of everything else.
func packSmall(enc *zstd.Encoder, blobs []stored, small []bool) []stored {
	out := make([]stored, 0, len(blobs))
	var run []int // indexes into blobs
	runRaw := 0
	flush := func() {
		if len(run) >= 2 {
			if p, ok := makePack(enc, blobs, run); ok {
				out = append(out, p)
				run, runRaw = run[:0], 0
				return
			}
		}
		for _, i := range run {
			out = append(out, compressOne(enc, blobs[i]))
		}
		run, runRaw = run[:0], 0
	}
	for i, s := range blobs {
		if !small[i] || s.comp != compRaw {
			out = append(out, s)
			continue
		}
		if runRaw+len(s.data)+binary.MaxVarintLen32 > packRawMax {
			flush()
		}
		run = append(run, i)
		runRaw += len(s.data) + binary.MaxVarintLen32
	}
	flush()
	return out
}

// packable reports whether a frame has two or more objects a pack takes.
func packable(blobs []Blob) bool {
	n := 0
	for _, bl := range blobs {
		if len(bl.Data) <= packObjectMax {
			if n++; n == 2 {
				return true
			}
		}
	}
	return false
}

// makePack encodes blobs[run] as one pack.
func makePack(enc *zstd.Encoder, blobs []stored, run []int) (stored, bool) {
	alone := 0
	for _, i := range run {
		alone += len(blobs[i].data)
	}
	// Sized once: grown by append, the pack's bytes were copied over and
	// over (6 % of a first import's CPU).
	raw := make([]byte, 0, alone+len(run)*binary.MaxVarintLen32)
	for _, i := range run {
		raw = binary.AppendUvarint(raw, uint64(len(blobs[i].data)))
	}
	members := make([]packMember, len(run))
	for k, i := range run {
		members[k] = packMember{h: blobs[i].h, off: len(raw), n: len(blobs[i].data), fromIdx: i}
		raw = append(raw, blobs[i].data...)
	}
	z := enc.EncodeAll(raw, make([]byte, 0, len(raw)/2))
	if len(z) > alone-alone/8 {
		return stored{}, false
	}
	return stored{raw: len(raw), comp: compPack, data: z, members: members}, true
}

// compressOne stores a small object as Commit does when it does not pack.
func compressOne(enc *zstd.Encoder, s stored) stored {
	if len(s.data) >= minCompress && compressible(enc, s.data) {
		c := enc.EncodeAll(s.data, make([]byte, 0, len(s.data)))
		if len(c) <= len(s.data)-len(s.data)/8 {
			s.comp, s.data = compZstd, c
		}
	}
	return s
}

// unpack decompresses a pack's stored bytes and splits them into its
// objects, checking that the lengths add up to rawLen.
func unpack(data []byte, count, rawLen int, scratch []byte) (raw []byte, offs, lens []int, err error) {
	_, dec, err := codecs()
	if err != nil {
		return nil, nil, nil, err
	}
	raw, err = dec.DecodeAll(data, scratch[:0])
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pack does not decompress: %v", err)
	}
	if len(raw) != rawLen {
		return nil, nil, nil, fmt.Errorf("pack decompresses to %d bytes, says %d", len(raw), rawLen)
	}
	i := 0
	total := 0
	lens = make([]int, count)
	for k := range lens {
		v, n := binary.Uvarint(raw[i:])
		if n <= 0 || v > uint64(rawLen) {
			return nil, nil, nil, fmt.Errorf("pack object %d: bad length", k)
		}
		lens[k], i, total = int(v), i+n, total+int(v)
	}
	if i+total != rawLen {
		return nil, nil, nil, fmt.Errorf("pack of %d bytes holds %d bytes of lengths and %d of objects", rawLen, i, total)
	}
	offs = make([]int, count)
	for k := range lens {
		offs[k], i = i, i+lens[k]
	}
	return raw, offs, lens, nil
}

// share is the part of its segment's bytes an object's index entry
// accounts for: its stored bytes, or for an object in a pack its
// proportion of the pack's.
func (l Loc) share() int64 {
	if l.Comp != compPack || l.PackRaw == 0 {
		return int64(l.Stored)
	}
	return max(1, int64(l.Stored)*int64(l.Raw)/int64(l.PackRaw))
}

// packKey names a pack in the cache: segments are never reused and their
// bytes never change, so a cached pack cannot go stale.
type packKey struct {
	seg uint64
	off int64
}

// packCache keeps the last packCacheSize decompressed packs.
type packCache struct {
	mu   sync.Mutex
	keys [packCacheSize]packKey
	raws [packCacheSize][]byte
	next int
}

func (c *packCache) get(k packKey) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, have := range c.keys {
		if have == k && c.raws[i] != nil {
			return c.raws[i]
		}
	}
	return nil
}

func (c *packCache) add(k packKey, raw []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys[c.next], c.raws[c.next] = k, raw
	c.next = (c.next + 1) % packCacheSize
}

// readPacked returns a copy of the object at loc, in a pack. Get checks
// its hash; a pack that does not decompress to PackRaw bytes, or an
// object outside it, is ErrCorrupt.
func (b *Badger) readPacked(h Hash, loc Loc) ([]byte, error) {
	if uint64(loc.In)+uint64(loc.Raw) > uint64(loc.PackRaw) {
		return nil, fmt.Errorf("%s: object outside its pack: %w", h, ErrCorrupt)
	}
	k := packKey{loc.Seg, loc.Off}
	raw := b.packs.get(k)
	if raw == nil {
		z, err := b.log.readAt(loc.Seg, loc.Off, int(loc.Stored))
		if err != nil {
			return nil, err
		}
		_, dec, _ := codecs()
		raw, err = dec.DecodeAll(z, make([]byte, 0, loc.PackRaw))
		if err != nil || len(raw) != int(loc.PackRaw) {
			return nil, fmt.Errorf("%s: pack: %w", h, ErrCorrupt)
		}
		b.packs.add(k, raw)
	}
	return append([]byte(nil), raw[loc.In:loc.In+loc.Raw]...), nil
}

// unpackOne reads the object of a packed index entry, checks its hash
// (never copy damage forward) and returns it as the compactor stores it:
// alone, compressed when that pays.
func (b *Badger) unpackOne(e blobEntry) (stored, error) {
	data, err := b.readPacked(e.h, e.loc)
	if err != nil {
		return stored{}, err
	}
	if Sum(data) != e.h {
		return stored{}, fmt.Errorf("%s: %w", e.h, ErrCorrupt)
	}
	enc, _, err := codecs()
	if err != nil {
		return stored{}, err
	}
	return compressOne(enc, stored{h: e.h, raw: len(data), comp: compRaw, data: data}), nil
}
