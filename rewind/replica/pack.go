package replica

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/reynfs/reynfs/cas"
)

// ErrCorrupt: a remote object (pack, index, segment, HEAD, config) is
// damaged or not what its key says. The error names the key.
var ErrCorrupt = errors.New("remote object damaged")

// Pack kinds: inode objects, and file chunks with agent states.
const (
	KindTree byte = 't'
	KindData byte = 'd'
)

// Compression of one object in a pack.
const (
	compRaw  = 0
	compZstd = 1
)

// The pack format:
//
//	"RFSPACK2" kind(1) salt(16) object... index idxlen(4, BE)
//
// and the index (also stored alone as packs/<id>.idx):
//
//	"RFSIDX02" kind(1) count(4, BE) entry... datasum(32) selfsum(32)
//	entry: hash(32) comp(1) offset(8, BE) stored(4, BE) raw(4, BE)
//
// The salt is random, so no two packs share a name even when they hold
// the same objects: a push that sends again the objects of a pack remote
// GC condemned (gcguard.go) never writes under the key GC deletes. Packs
// written before the salt ("RFSPACK1", index "RFSIDX01": no salt, the
// objects from offset 9) are read as well.
//
// Entries are sorted by hash, unique, and the objects are stored in that
// order, so offsets run contiguously from the header on. datasum is the
// BLAKE3 of the pack's bytes before the index (header and objects),
// selfsum the BLAKE3 of the index's bytes before it. A zstd object must
// be at least an eighth smaller than raw; a raw one is stored as is.
const (
	packMagic   = "RFSPACK2"
	packMagicV1 = "RFSPACK1"
	idxMagic    = "RFSIDX02"
	idxMagicV1  = "RFSIDX01"
	saltLen     = 16
	packHeader  = len(packMagic) + 1 + saltLen
	// packHeaderV1: a pack without salt.
	packHeaderV1 = len(packMagicV1) + 1
	idxHeader    = len(idxMagic) + 1 + 4
	entrySize    = 32 + 1 + 8 + 4 + 4
	idxTrailer   = 64
	maxObject    = 1<<32 - 1
)

// IndexEntry locates one object in a pack.
type IndexEntry struct {
	Hash   cas.Hash
	Comp   uint8  // compRaw or compZstd
	Off    uint64 // from the pack's start
	Stored uint32 // bytes in the pack
	Raw    uint32 // bytes of the object
}

// Index is a pack's index.
type Index struct {
	Kind    byte
	Entries []IndexEntry
	DataSum cas.Hash
	// V1: the index of a pack without salt (RFSPACK1).
	V1 bool
}

// header is the size of its pack's header: where the objects start.
func (x *Index) header() uint64 {
	if x.V1 {
		return uint64(packHeaderV1)
	}
	return uint64(packHeader)
}

// Find returns the entry of h.
func (x *Index) Find(h cas.Hash) (IndexEntry, bool) {
	i, ok := slices.BinarySearchFunc(x.Entries, h, func(e IndexEntry, h cas.Hash) int { return bytes.Compare(e.Hash[:], h[:]) })
	if !ok {
		return IndexEntry{}, false
	}
	return x.Entries[i], true
}

var codec struct {
	once sync.Once
	enc  *zstd.Encoder
	dec  *zstd.Decoder
	err  error
}

func codecs() (*zstd.Encoder, *zstd.Decoder, error) {
	codec.once.Do(func() {
		codec.enc, codec.err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
		if codec.err == nil {
			codec.dec, codec.err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecodeAllCapLimit(true))
		}
	})
	return codec.enc, codec.dec, codec.err
}

// PackKey and IndexKey name a pack and its index in the remote.
func PackKey(id string) string  { return "packs/" + id + ".pack" }
func IndexKey(id string) string { return "packs/" + id + ".idx" }

// BuildPack packs blobs (each Hash must be Sum(Data); repeats are stored
// once) into one pack of kind, returning the pack's bytes, its index's
// bytes and its id (the hex BLAKE3 of the pack's bytes).
func BuildPack(kind byte, blobs []cas.Blob) (pack, idx []byte, id string, err error) {
	if kind != KindTree && kind != KindData {
		return nil, nil, "", fmt.Errorf("build pack: kind %q", kind)
	}
	enc, _, err := codecs()
	if err != nil {
		return nil, nil, "", fmt.Errorf("build pack: %w", err)
	}
	sorted := slices.Clone(blobs)
	slices.SortFunc(sorted, func(a, b cas.Blob) int { return bytes.Compare(a.Hash[:], b.Hash[:]) })
	sorted = slices.CompactFunc(sorted, func(a, b cas.Blob) bool { return a.Hash == b.Hash })
	x := &Index{Kind: kind, Entries: make([]IndexEntry, 0, len(sorted))}
	pack = append(make([]byte, 0, 1<<20), packMagic...)
	pack = append(pack, kind)
	var salt [saltLen]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return nil, nil, "", fmt.Errorf("build pack: %w", err)
	}
	pack = append(pack, salt[:]...)
	for _, b := range sorted {
		if len(b.Data) > maxObject {
			return nil, nil, "", fmt.Errorf("build pack: object %s is %d bytes", b.Hash, len(b.Data))
		}
		e := IndexEntry{Hash: b.Hash, Comp: compRaw, Off: uint64(len(pack)), Raw: uint32(len(b.Data))}
		stored := b.Data
		if len(b.Data) >= 64 {
			if z := enc.EncodeAll(b.Data, nil); len(z) <= len(b.Data)-len(b.Data)/8 {
				e.Comp, stored = compZstd, z
			}
		}
		e.Stored = uint32(len(stored))
		pack = append(pack, stored...)
		x.Entries = append(x.Entries, e)
	}
	x.DataSum = cas.Sum(pack)
	idx = encodeIndex(x)
	pack = append(pack, idx...)
	pack = binary.BigEndian.AppendUint32(pack, uint32(len(idx)))
	return pack, idx, cas.Sum(pack).String(), nil
}

func encodeIndex(x *Index) []byte {
	b := make([]byte, 0, idxHeader+len(x.Entries)*entrySize+idxTrailer)
	if x.V1 {
		b = append(b, idxMagicV1...)
	} else {
		b = append(b, idxMagic...)
	}
	b = append(b, x.Kind)
	b = binary.BigEndian.AppendUint32(b, uint32(len(x.Entries)))
	for _, e := range x.Entries {
		b = append(b, e.Hash[:]...)
		b = append(b, e.Comp)
		b = binary.BigEndian.AppendUint64(b, e.Off)
		b = binary.BigEndian.AppendUint32(b, e.Stored)
		b = binary.BigEndian.AppendUint32(b, e.Raw)
	}
	b = append(b, x.DataSum[:]...)
	self := cas.Sum(b)
	return append(b, self[:]...)
}

// DecodeIndex decodes an index exactly as encodeIndex writes it: every
// rule of the format is checked, and key names the object in errors.
func DecodeIndex(key string, b []byte) (*Index, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: index %s", key, ErrCorrupt, fmt.Sprintf(format, args...))
	}
	if len(b) < idxHeader+idxTrailer || string(b[:len(idxMagic)]) != idxMagic && string(b[:len(idxMagic)]) != idxMagicV1 {
		return nil, bad("header missing")
	}
	if self := cas.Sum(b[:len(b)-32]); !bytes.Equal(self[:], b[len(b)-32:]) {
		return nil, bad("checksum mismatch")
	}
	x := &Index{Kind: b[len(idxMagic)], V1: string(b[:len(idxMagic)]) == idxMagicV1}
	if x.Kind != KindTree && x.Kind != KindData {
		return nil, bad("kind %q", x.Kind)
	}
	n := int(binary.BigEndian.Uint32(b[len(idxMagic)+1:]))
	if len(b) != idxHeader+n*entrySize+idxTrailer || n > (len(b)-idxHeader)/entrySize {
		return nil, bad("%d entries in %d bytes", n, len(b))
	}
	off := x.header()
	x.Entries = make([]IndexEntry, n)
	for i := range n {
		p := b[idxHeader+i*entrySize:]
		e := &x.Entries[i]
		copy(e.Hash[:], p)
		e.Comp = p[32]
		e.Off = binary.BigEndian.Uint64(p[33:])
		e.Stored = binary.BigEndian.Uint32(p[41:])
		e.Raw = binary.BigEndian.Uint32(p[45:])
		switch {
		case i > 0 && bytes.Compare(x.Entries[i-1].Hash[:], e.Hash[:]) >= 0:
			return nil, bad("entry %d out of hash order", i)
		case e.Off != off:
			return nil, bad("entry %d at offset %d, want %d", i, e.Off, off)
		case e.Comp == compRaw && e.Stored != e.Raw:
			return nil, bad("raw entry %d stores %d of %d bytes", i, e.Stored, e.Raw)
		case e.Comp == compZstd && (e.Raw < 64 || e.Stored > e.Raw-e.Raw/8):
			return nil, bad("zstd entry %d stores %d of %d bytes", i, e.Stored, e.Raw)
		case e.Comp > compZstd:
			return nil, bad("entry %d compression %d", i, e.Comp)
		}
		off += uint64(e.Stored)
	}
	copy(x.DataSum[:], b[len(b)-64:])
	return x, nil
}

// dataEnd is where the objects end: where the index starts in the pack.
func (x *Index) dataEnd() uint64 {
	if len(x.Entries) == 0 {
		return x.header()
	}
	e := x.Entries[len(x.Entries)-1]
	return e.Off + uint64(e.Stored)
}

// OpenPack checks a whole pack fetched under id: its bytes hash to id,
// its header and embedded index are well formed and the index covers its
// objects. It returns the index.
func OpenPack(id string, pack []byte) (*Index, error) {
	key := PackKey(id)
	if cas.Sum(pack).String() != id {
		return nil, fmt.Errorf("%s: %w: bytes do not hash to the pack's name", key, ErrCorrupt)
	}
	v1 := len(pack) >= packHeaderV1 && string(pack[:len(packMagicV1)]) == packMagicV1
	head := packHeader
	if v1 {
		head = packHeaderV1
	}
	if len(pack) < head+4 || !v1 && string(pack[:len(packMagic)]) != packMagic {
		return nil, fmt.Errorf("%s: %w: header missing", key, ErrCorrupt)
	}
	n := uint64(binary.BigEndian.Uint32(pack[len(pack)-4:]))
	if n > uint64(len(pack)-head-4) {
		return nil, fmt.Errorf("%s: %w: index of %d bytes in %d", key, ErrCorrupt, n, len(pack))
	}
	start := uint64(len(pack)-4) - n
	x, err := DecodeIndex(key, pack[start:len(pack)-4])
	if err != nil {
		return nil, err
	}
	if x.V1 != v1 || x.Kind != pack[len(packMagic)] || x.dataEnd() != start || cas.Sum(pack[:start]) != x.DataSum {
		return nil, fmt.Errorf("%s: %w: index does not describe the pack", key, ErrCorrupt)
	}
	return x, nil
}

// Object returns the object e names, given the bytes the pack stores for
// it (pack[e.Off:e.Off+e.Stored]), after checking that it hashes to its
// name. key names the pack in errors.
func Object(key string, e IndexEntry, stored []byte) ([]byte, error) {
	if len(stored) != int(e.Stored) {
		return nil, fmt.Errorf("%s: %w: object %s: %d of %d bytes", key, ErrCorrupt, e.Hash, len(stored), e.Stored)
	}
	data := stored
	if e.Comp == compZstd {
		_, dec, err := codecs()
		if err != nil {
			return nil, err
		}
		data, err = dec.DecodeAll(stored, make([]byte, 0, e.Raw))
		if err != nil {
			return nil, fmt.Errorf("%s: %w: object %s: %v", key, ErrCorrupt, e.Hash, err)
		}
	}
	if len(data) != int(e.Raw) || cas.Sum(data) != e.Hash {
		return nil, fmt.Errorf("%s: %w: object %s does not hash to its name", key, ErrCorrupt, e.Hash)
	}
	return data, nil
}

// PackObjects returns every object of a pack (checked by OpenPack), each
// verified.
func PackObjects(id string, pack []byte, x *Index) ([]cas.Blob, error) {
	out := make([]cas.Blob, 0, len(x.Entries))
	for _, e := range x.Entries {
		data, err := Object(PackKey(id), e, pack[e.Off:e.Off+uint64(e.Stored)])
		if err != nil {
			return nil, err
		}
		out = append(out, cas.Blob{Hash: e.Hash, Data: data})
	}
	return out, nil
}
