package cas

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Compact index entries (store format 6). Formats 2-5 wrote a Loc as
// fixed-width big-endian fields: 25 bytes, 33 for an object in a pack, 59
// for a delta. Most of those bytes are zeros (a segment number of 1 in 8
// bytes, offsets of a few MB in 8, lengths of a few KB in 4), which the
// index's zstd blocks squeeze only partly: the object index was 1.40 MB of
// the benchmark's 4.9 MiB store, 0.26 MB of it these values
// (docs/storage.md, section 6). A compact entry is a tag byte and
// uvarints:
//
//	0x80|comp  seg off stored raw  [delta: 32-byte base, depth]  [pack: in, packRaw]
//
// The tag's high bit tells the two forms apart: a fixed-width entry starts
// with the segment number's top byte, which is zero for every segment a
// store can have (fewer than 2^56). decodeLoc reads both, so a store the
// format-5 code wrote opens as it is and its entries are rewritten only
// when an object moves (the compactor, a replay). A format-5 reader would
// take a compact entry for damage: hence the format.

// locCompactTag marks a compact entry; the low bits are Loc.Comp.
const locCompactTag = 0x80

// encodeCompact returns l's compact index entry.
func (l Loc) encodeCompact() []byte {
	b := make([]byte, 0, 1+4*binary.MaxVarintLen64+len(Hash{})+binary.MaxVarintLen16)
	b = append(b, locCompactTag|l.Comp)
	b = binary.AppendUvarint(b, l.Seg)
	b = binary.AppendUvarint(b, uint64(l.Off))
	b = binary.AppendUvarint(b, uint64(l.Stored))
	b = binary.AppendUvarint(b, uint64(l.Raw))
	switch l.Comp {
	case compDelta:
		b = append(b, l.Base[:]...)
		b = binary.AppendUvarint(b, uint64(l.Depth))
	case compPack:
		b = binary.AppendUvarint(b, uint64(l.In))
		b = binary.AppendUvarint(b, uint64(l.PackRaw))
	}
	return b
}

// decodeCompact reads what encodeCompact wrote. It refuses what
// encodeCompact would not write (an unknown compression, a field out of
// range, trailing bytes), as damage.
func decodeCompact(b []byte) (Loc, error) {
	bad := func(what string) (Loc, error) {
		return Loc{}, fmt.Errorf("%w: compact object index entry: %s", ErrDamaged, what)
	}
	l := Loc{Comp: b[0] &^ locCompactTag}
	if l.Comp > compPack {
		return bad(fmt.Sprintf("compression %d", l.Comp))
	}
	r := b[1:]
	next := func(limit uint64) (uint64, bool) {
		v, n := binary.Uvarint(r)
		if n <= 0 || v > limit {
			return 0, false
		}
		r = r[n:]
		return v, true
	}
	seg, ok1 := next(math.MaxUint64)
	off, ok2 := next(math.MaxInt64)
	st, ok3 := next(math.MaxUint32)
	raw, ok4 := next(math.MaxUint32)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return bad("bad location")
	}
	l.Seg, l.Off, l.Stored, l.Raw = seg, int64(off), uint32(st), uint32(raw)
	switch l.Comp {
	case compDelta:
		if len(r) < len(Hash{}) {
			return bad("truncated base")
		}
		copy(l.Base[:], r)
		r = r[len(Hash{}):]
		d, ok := next(math.MaxUint16)
		if !ok || d == 0 {
			return bad("delta depth")
		}
		l.Depth = uint16(d)
	case compPack:
		in, ok1 := next(math.MaxUint32)
		pr, ok2 := next(math.MaxUint32)
		if !ok1 || !ok2 || in+uint64(l.Raw) > pr {
			return bad("packed object outside its pack")
		}
		l.In, l.PackRaw = uint32(in), uint32(pr)
	}
	if len(r) != 0 {
		return bad(fmt.Sprintf("%d trailing bytes", len(r)))
	}
	return l, nil
}

// SameIndexEntry reports whether a and b are object index entries (values
// under LogPrefix) that name the same location, whichever form each was
// written in: an entry a format-5 binary wrote and the compact one a
// replay writes for the same object are the same entry.
func SameIndexEntry(a, b []byte) bool {
	la, err := decodeLoc(a)
	if err != nil {
		return false
	}
	lb, err := decodeLoc(b)
	return err == nil && la == lb
}
