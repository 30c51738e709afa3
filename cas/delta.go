package cas

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// The delta codec: an object stored as the edits that turn another object
// (its base, usually the previous version of the same inode) into it.
//
// It is git's diff-delta idea, generic over bytes: the base is indexed by
// the hash of each aligned 16-byte block, the target is scanned at every
// offset for a block the base also has, a match is extended both ways, and
// the result is a list of two ops, copy a range of the base and insert
// literal bytes. A directory object that changed one child is then a copy
// of the bytes before the child's hash, 32 literal bytes and a copy of the
// rest: some 45 bytes for a 4 KB object, where zstd cannot shrink the 32-byte
// hashes at all. Nothing here knows what the bytes mean, so the same codec
// serves chunk lists and, later, file chunks (database pages).
//
// Encoding (all numbers uvarints):
//
//	delta := baseLen targetLen op*
//	op    := n<<1|0 literal[n]      insert n bytes
//	       | n<<1|1 off             copy base[off:off+n]
//
// with n >= 1. Undelta checks every length and offset against the base,
// the input and the expected target length before it copies a byte, so a
// damaged or hostile delta is an error, never a panic or an allocation
// larger than the caller allowed.

// deltaBlock is the length of the base blocks the encoder indexes: the
// shortest match it finds. 16 bytes is half a hash, so a changed child
// hash never hides the unchanged bytes around it.
const deltaBlock = 16

// ErrBadDelta: a delta does not decode against its base.
var ErrBadDelta = errors.New("bad delta")

// Delta returns the edits that turn base into target (see above). It never
// fails; a target that shares nothing with base comes out as one insert,
// a few bytes longer than target.
//
// The common prefix and suffix are copied first without an index, eight
// bytes at a time: a directory with one entry changed costs a compare
// pass, and only the bytes between them are indexed and scanned. When the
// bytes between are as long in both (an edit in place: a file chunk a
// write patched, a child hash replaced) they are compared at equal offsets
// only (appendAligned), with no index at all.
func Delta(base, target []byte) []byte {
	out := make([]byte, 0, 16+len(target)/8)
	out = binary.AppendUvarint(out, uint64(len(base)))
	out = binary.AppendUvarint(out, uint64(len(target)))
	pre := matchLen(base, target)
	suf := matchLenBack(base[pre:], target[pre:])
	if pre < deltaBlock {
		pre = 0 // a copy op is not worth fewer bytes; the scan may do better
	}
	if suf < deltaBlock {
		suf = 0
	}
	if pre > 0 {
		out = appendCopy(out, 0, pre)
	}
	if mb, mt := base[pre:len(base)-suf], target[pre:len(target)-suf]; len(mb) == len(mt) {
		out = appendAligned(out, mb, mt, pre)
	} else {
		out = appendOps(out, mb, mt, pre)
	}
	if suf > 0 {
		out = appendCopy(out, len(base)-suf, suf)
	}
	return out
}

// appendAligned appends the ops that make target out of base, of the
// same length, copying only bytes at the same offset in both: an in-place
// edit (a write into a chunk, a database rewriting its pages, a directory
// entry's new child hash) moves nothing, so the equal runs are found by a
// compare eight bytes at a time instead of appendOps' hash of every
// offset, which costs some 40 µs on the 4 KiB a random write changed in a
// 64 KiB chunk. A run shorter than deltaBlock stays in the literal bytes.
func appendAligned(out, base, target []byte, off int) []byte {
	lit := 0 // start of the bytes not yet emitted
	for i := 0; i+deltaBlock <= len(target); {
		if !equal16(base[i:], target[i:]) {
			i += 8
			continue
		}
		start := i
		for start > lit && base[start-1] == target[start-1] {
			start--
		}
		end := i + deltaBlock + matchLen(base[i+deltaBlock:], target[i+deltaBlock:])
		if start > lit {
			out = appendInsert(out, target[lit:start])
		}
		out = appendCopy(out, off+start, end-start)
		i, lit = end, end
	}
	if lit < len(target) {
		out = appendInsert(out, target[lit:])
	}
	return out
}

// appendOps appends the ops that make target out of base, which starts at
// offset off of the whole base.
func appendOps(out, base, target []byte, off int) []byte {
	if len(base) < deltaBlock || len(target) < deltaBlock {
		return appendInsert(out, target)
	}
	nblocks := len(base) / deltaBlock
	shift := 64 - uint(bits.Len(uint(2*nblocks)))
	table := make([]int32, 1<<(64-shift)) // offset+1 of a block with that hash
	mask := uint64(len(table) - 1)
	// From the last block back, so that the first of equal blocks wins.
	for b := nblocks - 1; b >= 0; b-- {
		o := b * deltaBlock
		table[blockHash(base[o:], shift)&mask] = int32(o + 1)
	}
	lit := 0 // start of the bytes not yet emitted
	for i := 0; i+deltaBlock <= len(target); {
		c := int(table[blockHash(target[i:], shift)&mask]) - 1
		if c < 0 || !equal16(base[c:], target[i:]) {
			i++
			continue
		}
		n := deltaBlock + matchLen(base[c+deltaBlock:], target[i+deltaBlock:])
		back := 0
		for i-back > lit && c-back > 0 && base[c-back-1] == target[i-back-1] {
			back++
		}
		if i-back > lit {
			out = appendInsert(out, target[lit:i-back])
		}
		out = appendCopy(out, off+c-back, n+back)
		i += n
		lit = i
	}
	if lit < len(target) {
		out = appendInsert(out, target[lit:])
	}
	return out
}

func appendCopy(out []byte, off, n int) []byte {
	out = binary.AppendUvarint(out, uint64(n)<<1|1)
	return binary.AppendUvarint(out, uint64(off))
}

func appendInsert(out, lit []byte) []byte {
	if len(lit) == 0 {
		return out
	}
	out = binary.AppendUvarint(out, uint64(len(lit))<<1)
	return append(out, lit...)
}

// blockHash hashes the 16 bytes at p into the top bits of a word (shift
// keeps the table's width).
func blockHash(p []byte, shift uint) uint64 {
	a := binary.LittleEndian.Uint64(p)
	b := binary.LittleEndian.Uint64(p[8:])
	return (a*0x9E3779B97F4A7C15 ^ bits.RotateLeft64(b*0xC2B2AE3D27D4EB4F, 31)) >> shift
}

// matchBlock is the span matchLen and matchLenBack compare with
// bytes.Equal (vector instructions), after spans of 16 of it, before they
// find the first differing byte eight bytes at a time: a 64 KiB file chunk with 4 KiB changed is
// compared at some 20 GB/s instead of 3 (the word loop alone was a tenth
// of the daemon's CPU under fio's random writes).
const matchBlock = 256

// matchLen returns the length of the common prefix of a and b, compared
// eight bytes at a time (a directory's versions share kilobytes).
func matchLen(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for _, blk := range [...]int{16 * matchBlock, matchBlock} {
		for i+blk <= n && bytes.Equal(a[i:i+blk], b[i:i+blk]) {
			i += blk
		}
	}
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// matchLenBack returns the length of the common suffix of a and b.
func matchLenBack(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for _, blk := range [...]int{16 * matchBlock, matchBlock} {
		for i+blk <= n && bytes.Equal(a[len(a)-i-blk:len(a)-i], b[len(b)-i-blk:len(b)-i]) {
			i += blk
		}
	}
	for ; i+8 <= n; i += 8 {
		x := binary.LittleEndian.Uint64(a[len(a)-i-8:]) ^ binary.LittleEndian.Uint64(b[len(b)-i-8:])
		if x != 0 {
			return i + bits.LeadingZeros64(x)/8
		}
	}
	for i < n && a[len(a)-i-1] == b[len(b)-i-1] {
		i++
	}
	return i
}

func equal16(a, b []byte) bool {
	return binary.LittleEndian.Uint64(a) == binary.LittleEndian.Uint64(b) &&
		binary.LittleEndian.Uint64(a[8:]) == binary.LittleEndian.Uint64(b[8:])
}

// DeltaTargetLen returns the target length a delta declares, without
// decoding it.
func DeltaTargetLen(delta []byte) (int, error) {
	_, n := binary.Uvarint(delta)
	if n <= 0 {
		return 0, fmt.Errorf("%w: base length", ErrBadDelta)
	}
	t, m := binary.Uvarint(delta[n:])
	if m <= 0 || t > 1<<31 {
		return 0, fmt.Errorf("%w: target length", ErrBadDelta)
	}
	return int(t), nil
}

// Undelta applies delta to base and returns the target. It refuses a delta
// made for a base of another length, one whose target is longer than limit,
// and any op that reaches outside the base or the delta (ErrBadDelta).
func Undelta(base, delta []byte, limit int) ([]byte, error) {
	return undeltaInto(nil, base, delta, limit)
}

// undeltaInto is Undelta appending to dst[:0] (its capacity reused when
// it suffices); dst must not overlap base.
func undeltaInto(dst, base, delta []byte, limit int) ([]byte, error) {
	bad := func(what string, at int) error {
		return fmt.Errorf("%w: %s at byte %d", ErrBadDelta, what, at)
	}
	i := 0
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(delta[i:])
		if n <= 0 {
			return 0, false
		}
		i += n
		return v, true
	}
	bl, ok := uv()
	if !ok || bl != uint64(len(base)) {
		return nil, bad(fmt.Sprintf("base length (have %d)", len(base)), 0)
	}
	tl, ok := uv()
	if !ok || tl > uint64(limit) {
		return nil, bad(fmt.Sprintf("target length (at most %d)", limit), i)
	}
	out := dst[:0]
	if cap(out) < int(tl) {
		out = make([]byte, 0, int(tl))
	}
	for i < len(delta) {
		at := i
		op, ok := uv()
		n := op >> 1
		if !ok || n == 0 || n > tl-uint64(len(out)) {
			return nil, bad("op length", at)
		}
		if op&1 == 0 {
			if n > uint64(len(delta)-i) {
				return nil, bad("insert past the end", at)
			}
			out = append(out, delta[i:i+int(n)]...)
			i += int(n)
			continue
		}
		off, ok := uv()
		if !ok || off > uint64(len(base)) || n > uint64(len(base))-off {
			return nil, bad("copy outside the base", at)
		}
		out = append(out, base[off:off+n]...)
	}
	if uint64(len(out)) != tl {
		return nil, bad(fmt.Sprintf("%d bytes made of %d", len(out), tl), i)
	}
	return out, nil
}

// undeltaInPlace applies delta to buf, which holds its base, when the
// delta is an edit in place: as long as its base, and every copy taking
// the base's bytes at the offset it writes them to (what Delta makes of a
// file chunk a write patched: appendAligned). Such copies are no-ops on
// buf and the inserts overwrite what they replace, so a chain of them
// costs its inserted bytes, not a copy of the object per link. It reports
// false, with buf untouched, for any other delta (undeltaInto applies it)
// and for one that does not decode (undeltaInto reports why).
func undeltaInPlace(buf, delta []byte) bool {
	ops, ok := inPlaceOps(len(buf), delta)
	if !ok {
		return false
	}
	for i, pos := ops, 0; i < len(delta); {
		op, n := binary.Uvarint(delta[i:])
		i += n
		k := int(op >> 1)
		if op&1 == 0 {
			copy(buf[pos:], delta[i:i+k])
			i += k
		} else {
			_, n := binary.Uvarint(delta[i:])
			i += n
		}
		pos += k
	}
	return true
}

// inPlaceOps checks that delta is an edit in place of an object of size
// bytes that decodes completely (see undeltaInPlace), and returns where
// its ops start.
func inPlaceOps(size int, delta []byte) (int, bool) {
	i := 0
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(delta[i:])
		if n <= 0 {
			return 0, false
		}
		i += n
		return v, true
	}
	bl, ok1 := uv()
	tl, ok2 := uv()
	if !ok1 || !ok2 || bl != uint64(size) || tl != uint64(size) {
		return 0, false
	}
	start := i
	pos := uint64(0)
	for i < len(delta) {
		op, ok := uv()
		n := op >> 1
		if !ok || n == 0 || n > tl-pos {
			return 0, false
		}
		if op&1 == 0 {
			if n > uint64(len(delta)-i) {
				return 0, false
			}
			i += int(n)
		} else if off, ok := uv(); !ok || off != pos {
			return 0, false
		}
		pos += n
	}
	return start, pos == tl
}

// DeltaPages is Delta for a target as long as its base that differs from
// it only in the pageSize pages whose bit is set in changed (bit i: bytes
// [i*pageSize, (i+1)*pageSize)): the other pages are copied without a
// compare, and only the changed ones are scanned, as appendAligned scans
// an edit in place (equal runs at the same offset; a run shorter than
// deltaBlock stays literal). A random 4 KiB write into a 64 KiB chunk then
// costs a compare of its page, not of the chunk. The caller vouches for
// the clean pages (the store checks their CRC-32C against the base's,
// asDelta); the result decodes with Undelta like any delta.
func DeltaPages(base, target []byte, changed uint64) []byte {
	n := len(target)
	if len(base) != n || n > 64*pageSize {
		return Delta(base, target)
	}
	clean := func(i int) bool { return changed&(1<<(i/pageSize)) == 0 }
	pageEnd := func(i int) int { return min((i/pageSize+1)*pageSize, n) }
	out := make([]byte, 0, 32+n/16)
	out = binary.AppendUvarint(out, uint64(len(base)))
	out = binary.AppendUvarint(out, uint64(n))
	lit := 0 // start of the bytes not yet emitted
	for i := 0; i < n; {
		// The start of the next equal run at or after i.
		s := n
		for j := i; j < n; {
			if clean(j) {
				s = j
				break
			}
			if j+deltaBlock > n {
				break
			}
			if equal16(base[j:], target[j:]) {
				s = j
				break
			}
			j += 8
		}
		if s == n {
			break
		}
		// Its end: clean pages whole, changed ones compared.
		e := s
		for e < n {
			pe := pageEnd(e)
			if clean(e) {
				e = pe
				continue
			}
			e += matchLen(base[e:pe], target[e:pe])
			if e < pe {
				break
			}
		}
		for s > lit && base[s-1] == target[s-1] {
			s--
		}
		if e-s >= deltaBlock {
			out = appendInsert(out, target[lit:s])
			out = appendCopy(out, s, e-s)
			lit = e
		}
		i = max(e, i+1)
	}
	return appendInsert(out, target[lit:])
}
