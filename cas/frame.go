package cas

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Op is one index write a frame carries besides its blobs: Key set to
// Val, or Key deleted (Del). The journal's records, its reset index, its
// meta writes and "m/seq" travel as Ops, so replaying a frame's Ops
// rebuilds exactly what the commit wrote to Badger.
type Op struct {
	Key, Val []byte
	Del      bool
}

// Frame is what one commit appends to the log: the blobs first, then the
// ops in order. First and Last are the seqs of the records it carries
// (zero for a frame of blobs only), kept in the header for tools.
type Frame struct {
	First, Last uint64
	Blobs       []Blob
	Ops         []Op
	// Fresh: the writer knows no blob of the frame is stored (a first
	// import, see FreshPutter), so Commit does not look each one up.
	Fresh bool
	// Appended, if set, is called once the frame is in the log (written,
	// not synced) and before its index is written: a sync of the log may
	// start then, while the index write runs (SyncLog does not wait for
	// Commit).
	Appended func()
}

// Entry kinds in a frame's payload.
const (
	entryBlob  = 'b' // hash, compression, raw length, stored length, bytes (formats 2 and 3)
	entryDelta = 'D' // hash, base hash, depth, raw length, stored length, delta bytes (format 3)
	// entryBare is entryBlob without the hash (format 4): the name is
	// the hash of the bytes, which a replay of the frame (catch-up,
	// salvage) recomputes. The 32-byte name was 0.75 MB of the
	// benchmark's 5.2 MB log, where the index has it anyway.
	entryBare = 'c' // compression, raw length, stored length, bytes
	entrySet  = 's' // key length, key, value length, value
	entryDel  = 'd' // key length, key
)

// Compression of a stored blob.
const (
	compRaw  = 0
	compZstd = 1
	// compDelta: the stored bytes are a Delta against Loc.Base (format 3;
	// a frame says so with an entryDelta, never with this byte).
	compDelta = 2
)

// Loc is where an object's stored bytes are: the index value under
// LogPrefix.
type Loc struct {
	Seg    uint64
	Off    int64
	Stored uint32 // bytes in the segment
	Raw    uint32 // bytes after decompression (of the object, for a delta)
	Comp   byte
	// A delta (Comp == compDelta) names its base and how many deltas a
	// read applies to reach it from a whole object (1: its base is
	// whole), so a writer bounds chains without walking them.
	Base  Hash
	Depth uint16
	// An object in a pack (Comp == compPack, format 5; see pack.go):
	// Off and Stored are the pack's, Raw the object's, In where the
	// object starts in the decompressed pack of PackRaw bytes.
	In, PackRaw uint32
}

const (
	locLen      = 8 + 8 + 4 + 4 + 1
	locDeltaLen = locLen + len(Hash{}) + 2
	locPackLen  = locLen + 4 + 4
)

// encode returns l's index entry, compact (loc.go) since format 6.
func (l Loc) encode() []byte { return l.encodeCompact() }

// encodeFixed returns l's index entry as formats 2-5 wrote it.
func (l Loc) encodeFixed() []byte {
	n := locLen
	switch l.Comp {
	case compDelta:
		n = locDeltaLen
	case compPack:
		n = locPackLen
	}
	b := make([]byte, n)
	binary.BigEndian.PutUint64(b, l.Seg)
	binary.BigEndian.PutUint64(b[8:], uint64(l.Off))
	binary.BigEndian.PutUint32(b[16:], l.Stored)
	binary.BigEndian.PutUint32(b[20:], l.Raw)
	b[24] = l.Comp
	if l.Comp == compDelta {
		copy(b[locLen:], l.Base[:])
		binary.BigEndian.PutUint16(b[locLen+len(Hash{}):], l.Depth)
	}
	if l.Comp == compPack {
		binary.BigEndian.PutUint32(b[locLen:], l.In)
		binary.BigEndian.PutUint32(b[locLen+4:], l.PackRaw)
	}
	return b
}

// decodeLoc reads an index entry: a compact one (format 6, loc.go), or
// as formats 2-5 wrote them, locLen bytes for an object stored whole,
// locDeltaLen for a delta, locPackLen for an object in a pack (a reader
// of an older format refuses the longer ones as damage, which is why
// deltas came with format 3, packs with 5 and compact entries with 6).
func decodeLoc(b []byte) (Loc, error) {
	if len(b) > 0 && b[0]&locCompactTag != 0 {
		return decodeCompact(b)
	}
	if len(b) != locLen && len(b) != locDeltaLen && len(b) != locPackLen {
		return Loc{}, fmt.Errorf("%w: object index entry of %d bytes, want %d, %d or %d", ErrDamaged, len(b), locLen, locDeltaLen, locPackLen)
	}
	l := Loc{Seg: binary.BigEndian.Uint64(b), Off: int64(binary.BigEndian.Uint64(b[8:])),
		Stored: binary.BigEndian.Uint32(b[16:]), Raw: binary.BigEndian.Uint32(b[20:]), Comp: b[24]}
	if (len(b) == locDeltaLen) != (l.Comp == compDelta) || (len(b) == locPackLen) != (l.Comp == compPack) {
		return Loc{}, fmt.Errorf("%w: object index entry of %d bytes with compression %d", ErrDamaged, len(b), l.Comp)
	}
	if l.Comp == compPack {
		l.In, l.PackRaw = binary.BigEndian.Uint32(b[locLen:]), binary.BigEndian.Uint32(b[locLen+4:])
		if uint64(l.In)+uint64(l.Raw) > uint64(l.PackRaw) {
			return Loc{}, fmt.Errorf("%w: packed object's index entry points outside its pack", ErrDamaged)
		}
	}
	if l.Comp == compDelta {
		copy(l.Base[:], b[locLen:])
		l.Depth = binary.BigEndian.Uint16(b[locLen+len(Hash{}):])
		if l.Depth == 0 {
			return Loc{}, fmt.Errorf("%w: delta index entry of depth 0", ErrDamaged)
		}
	}
	return l, nil
}

// stored is a blob as it goes into a frame.
type stored struct {
	h     Hash
	raw   int
	comp  byte
	data  []byte
	base  Hash // comp == compDelta
	depth uint16
	// comp == compPack: the objects in it (raw is the pack's length)
	members []packMember
}

// frameVec is an encoded frame as the pieces one pwritev writes: the
// header and the entries' own bytes in one buffer, and each blob's stored
// bytes of at least minPiece in place, so that a commit never copies (nor
// allocates and clears a buffer for) the chunk data it appends.
type frameVec struct {
	parts [][]byte
	n     int // total length
}

// len is the frame's length in bytes, header included.
func (v frameVec) len() int { return v.n }

// bytes returns the frame as one slice (tests, and tools that want one).
func (v frameVec) bytes() []byte {
	out := make([]byte, 0, v.n)
	for _, p := range v.parts {
		out = append(out, p...)
	}
	return out
}

// minPiece is the smallest blob written from its own buffer; smaller ones
// are copied into the entries' buffer, which keeps the iovec count low.
const minPiece = 2 << 10

// encodeFrame returns the frame (header and payload) and, for each blob,
// the offset of its stored bytes from the start of the frame. The frame
// aliases the blobs' data: they must not change until it is written.
func encodeFrame(first, last uint64, blobs []stored, ops []Op) (frameVec, []int64) {
	n := frameHeaderSize
	pieces := 1
	for _, b := range blobs {
		n += 1 + 2*len(b.h) + 1 + 3*binary.MaxVarintLen64 // a delta's base and depth too
		if len(b.data) < minPiece {
			n += len(b.data)
		} else {
			pieces += 2
		}
	}
	for _, o := range ops {
		n += 1 + 2*binary.MaxVarintLen64 + len(o.Key) + len(o.Val)
	}
	// buf never grows past n, so the parts cut from it stay valid.
	buf := make([]byte, frameHeaderSize, n)
	v := frameVec{parts: make([][]byte, 0, pieces)}
	cut := 0 // buf[cut:] is not in v.parts yet
	offs := make([]int64, len(blobs))
	for i, b := range blobs {
		switch b.comp {
		case compDelta:
			buf = append(buf, entryDelta)
			buf = append(buf, b.h[:]...)
			buf = append(buf, b.base[:]...)
			buf = binary.AppendUvarint(buf, uint64(b.depth))
		case compPack:
			buf = append(buf, entryPack)
			buf = binary.AppendUvarint(buf, uint64(len(b.members)))
		default:
			buf = append(buf, entryBare, b.comp)
		}
		buf = binary.AppendUvarint(buf, uint64(b.raw))
		buf = binary.AppendUvarint(buf, uint64(len(b.data)))
		offs[i] = int64(v.n + len(buf) - cut)
		if len(b.data) < minPiece {
			buf = append(buf, b.data...)
			continue
		}
		v.parts = append(v.parts, buf[cut:], b.data)
		v.n += len(buf) - cut + len(b.data)
		cut = len(buf)
	}
	for _, o := range ops {
		if o.Del {
			buf = append(buf, entryDel)
			buf = binary.AppendUvarint(buf, uint64(len(o.Key)))
			buf = append(buf, o.Key...)
			continue
		}
		buf = append(buf, entrySet)
		buf = binary.AppendUvarint(buf, uint64(len(o.Key)))
		buf = append(buf, o.Key...)
		buf = binary.AppendUvarint(buf, uint64(len(o.Val)))
		buf = append(buf, o.Val...)
	}
	if len(buf) > cut {
		v.parts = append(v.parts, buf[cut:])
		v.n += len(buf) - cut
	}
	crc := crc32.Checksum(v.parts[0][frameHeaderSize:], castagnoli)
	for _, p := range v.parts[1:] {
		crc = crc32.Update(crc, castagnoli, p)
	}
	h := buf[:frameHeaderSize]
	binary.BigEndian.PutUint32(h, frameMagic)
	binary.BigEndian.PutUint32(h[4:], uint32(v.n-frameHeaderSize))
	binary.BigEndian.PutUint64(h[8:], first)
	binary.BigEndian.PutUint64(h[16:], last)
	binary.BigEndian.PutUint32(h[24:], crc)
	setFrameMark(v, Pos{})
	return v, offs
}

// setFrameMark writes the synced-through mark into an encoded frame's
// header (and the header's checksum, which covers it). The writer sets it
// just before the frame goes into the log, under the log's lock, so it is
// the end of the last sync that completed before the frame was written;
// the payload's checksum does not cover it and stays as encodeFrame made
// it.
func setFrameMark(v frameVec, mark Pos) {
	h := v.parts[0][:frameHeaderSize]
	binary.BigEndian.PutUint64(h[28:], mark.Seg)
	binary.BigEndian.PutUint64(h[36:], uint64(mark.Off))
	binary.BigEndian.PutUint32(h[44:], crc32.Checksum(h[:44], castagnoli))
}

// frameHeader is a parsed, checksum-checked frame header.
type frameHeader struct {
	size        int // of the header: frameHeaderSize, or frameHeaderV2Size
	length      int
	first, last uint64
	crc         uint32
	// mark is the frame's synced-through mark: when it was written, the
	// log was durable up to mark (a header of format 5 and older has
	// none: marked is false).
	mark   Pos
	marked bool
}

var errBadHeader = errors.New("bad frame header")

// parseFrameHeader reads a frame header of either kind: frameMagic (with
// a mark) or frameMagicV2 (without; written by store format 5 and older).
func parseFrameHeader(h []byte) (frameHeader, error) {
	if len(h) < frameHeaderV2Size {
		return frameHeader{}, errBadHeader
	}
	var fh frameHeader
	switch binary.BigEndian.Uint32(h) {
	case frameMagic:
		if len(h) < frameHeaderSize || crc32.Checksum(h[:44], castagnoli) != binary.BigEndian.Uint32(h[44:]) {
			return frameHeader{}, errBadHeader
		}
		fh.size, fh.marked = frameHeaderSize, true
		fh.mark = Pos{binary.BigEndian.Uint64(h[28:]), int64(binary.BigEndian.Uint64(h[36:]))}
		if fh.mark.Off < 0 {
			return frameHeader{}, errBadHeader
		}
	case frameMagicV2:
		if crc32.Checksum(h[:28], castagnoli) != binary.BigEndian.Uint32(h[28:]) {
			return frameHeader{}, errBadHeader
		}
		fh.size = frameHeaderV2Size
	default:
		return frameHeader{}, errBadHeader
	}
	fh.length = int(binary.BigEndian.Uint32(h[4:]))
	fh.first = binary.BigEndian.Uint64(h[8:])
	fh.last = binary.BigEndian.Uint64(h[16:])
	fh.crc = binary.BigEndian.Uint32(h[24:])
	if fh.length > maxFrame {
		return frameHeader{}, errBadHeader
	}
	return fh, nil
}

// blobEntry is a blob as a frame lists it: its name and where its stored
// bytes are (the offset is from the start of the payload).
type blobEntry struct {
	h    Hash
	loc  Loc
	data []byte
	kind byte // the frame entry's (tools: LogEntries)
}

// decodePayload parses a payload whose checksum matched: its blobs (with
// offsets relative to the payload) and ops. An entry that does not parse
// is damage the checksum did not catch, so it is an error, not a torn tail.
// A bare blob's name is computed: its bytes decompressed and hashed.
func decodePayload(p []byte) ([]blobEntry, []Op, error) {
	var scratch []byte
	var blobs []blobEntry
	var ops []Op
	bad := func(what string, at int) error {
		return fmt.Errorf("%w: frame entry at payload offset %d: %s", ErrDamaged, at, what)
	}
	uv := func(i int) (uint64, int, bool) {
		v, n := binary.Uvarint(p[i:])
		return v, i + n, n > 0
	}
	for i := 0; i < len(p); {
		at := i
		kind := p[i]
		i++
		switch kind {
		case entryPack:
			// Each object takes at least its length's byte in the raw
			// pack, which a pack's writer keeps under packRawMax; the
			// compressed pack may be far shorter than the count (a few
			// thousand near-identical small objects).
			count, j, ok := uv(i)
			raw, j, ok1 := uv(j)
			n, j, ok2 := uv(j)
			if !ok || !ok1 || !ok2 || n > uint64(len(p)-j) || raw > 1<<20 {
				return nil, nil, bad("pack length", at)
			}
			if count < 1 || count > raw {
				return nil, nil, bad("pack count", at)
			}
			data := p[j : j+int(n)]
			var offs, lens []int
			var err error
			var obj []byte
			obj, offs, lens, err = unpack(data, int(count), int(raw), scratch)
			if err != nil {
				return nil, nil, bad(err.Error(), at)
			}
			scratch = obj
			for k := range lens {
				o := obj[offs[k] : offs[k]+lens[k]]
				blobs = append(blobs, blobEntry{h: Sum(o), kind: entryPack, data: data, loc: Loc{
					Comp: compPack, Off: int64(j), Stored: uint32(n), Raw: uint32(lens[k]),
					In: uint32(offs[k]), PackRaw: uint32(raw)}})
			}
			i = j + int(n)
		case entryBlob, entryDelta, entryBare:
			e := blobEntry{kind: kind}
			if kind != entryBare {
				if len(p)-i < len(Hash{})+1 {
					return nil, nil, bad("truncated blob", at)
				}
				copy(e.h[:], p[i:])
				i += len(Hash{})
			} else if i >= len(p) {
				return nil, nil, bad("truncated blob", at)
			}
			if kind == entryDelta {
				if len(p)-i < len(Hash{})+1 {
					return nil, nil, bad("truncated delta", at)
				}
				copy(e.loc.Base[:], p[i:])
				depth, j, ok := uv(i + len(Hash{}))
				if !ok || depth == 0 || depth > maxDepth {
					return nil, nil, bad("delta depth", at)
				}
				e.loc.Comp, e.loc.Depth, i = compDelta, uint16(depth), j
			} else {
				if p[i] == compDelta {
					return nil, nil, bad("delta compression in a whole blob", at)
				}
				e.loc.Comp = p[i]
				i++
			}
			raw, j, ok1 := uv(i)
			if !ok1 {
				return nil, nil, bad("blob length", at)
			}
			n, j, ok2 := uv(j)
			if !ok2 || n > uint64(len(p)-j) || raw > 1<<32-1 {
				return nil, nil, bad("blob length", at)
			}
			e.loc.Raw, e.loc.Stored, e.loc.Off = uint32(raw), uint32(n), int64(j)
			e.data = p[j : j+int(n)]
			i = j + int(n)
			if kind == entryBare {
				var err error
				if e.h, scratch, err = nameBare(e.loc, e.data, scratch); err != nil {
					return nil, nil, bad(err.Error(), at)
				}
			}
			blobs = append(blobs, e)
		case entrySet, entryDel:
			kl, j, ok := uv(i)
			if !ok || kl > uint64(len(p)-j) {
				return nil, nil, bad("key length", at)
			}
			o := Op{Key: p[j : j+int(kl)], Del: kind == entryDel}
			i = j + int(kl)
			if kind == entrySet {
				vl, j, ok := uv(i)
				if !ok || vl > uint64(len(p)-j) {
					return nil, nil, bad("value length", at)
				}
				o.Val = p[j : j+int(vl)]
				i = j + int(vl)
			}
			ops = append(ops, o)
		default:
			return nil, nil, bad(fmt.Sprintf("unknown kind %#x", kind), at)
		}
	}
	return blobs, ops, nil
}

// nameBare returns the name of a bare blob: the hash of its bytes after
// decompression into scratch (returned for reuse).
func nameBare(loc Loc, data, scratch []byte) (Hash, []byte, error) {
	switch loc.Comp {
	case compRaw:
		if len(data) != int(loc.Raw) {
			return Hash{}, scratch, fmt.Errorf("raw blob of %d bytes says %d", len(data), loc.Raw)
		}
		return Sum(data), scratch, nil
	case compZstd:
		_, dec, err := codecs()
		if err != nil {
			return Hash{}, scratch, err
		}
		out, err := dec.DecodeAll(data, scratch[:0])
		if err != nil {
			return Hash{}, scratch, fmt.Errorf("blob does not decompress: %v", err)
		}
		if len(out) != int(loc.Raw) {
			return Hash{}, out, fmt.Errorf("blob decompresses to %d bytes, says %d", len(out), loc.Raw)
		}
		return Sum(out), out, nil
	}
	return Hash{}, scratch, fmt.Errorf("blob compression %d", loc.Comp)
}
