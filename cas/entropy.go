package cas

import (
	"encoding/binary"
	"math"
)

// looksRandom reports whether zstd would fail to take an eighth off a
// sample (what a compressed copy must save), judged without running zstd:
// a greedy LZ parse (4-byte hash, one candidate per slot) finds what
// matches could cover, the order-0 entropy of the bytes left over bounds
// what Huffman coding gains on them, and the sample is skipped when the
// estimate saves less than a tenth. Media, archives, encrypted and random
// data (fio's buffers) are skipped this way at a fraction of the cost of
// the zstd attempt, which on the write path cost more CPU than hashing the
// whole chunk (fio seqwrite profile: 28% of the daemon against 9% for
// BLAKE3). Anything else gets the zstd attempt as before.
func looksRandom(s []byte) bool {
	if len(s) < 256 || len(s) >= len(xlog2x) {
		return false
	}
	var hist [256]uint32          // of the literals
	var table [1 << lzBits]uint16 // position+1 of the last 4 bytes hashed there
	lits, matches := 0, 0
	i := 0
	for ; i+4 <= len(s); i++ {
		x := binary.LittleEndian.Uint32(s[i:])
		slot := (x * 2654435761) >> (32 - lzBits)
		cand := int(table[slot]) - 1
		table[slot] = uint16(i + 1)
		if cand >= 0 && binary.LittleEndian.Uint32(s[cand:]) == x {
			l := 4
			for i+l < len(s) && s[cand+l] == s[i+l] {
				l++
			}
			matches++
			i += l - 1
			continue
		}
		hist[s[i]]++
		lits++
	}
	for ; i < len(s); i++ {
		hist[s[i]]++
		lits++
	}
	// Literal bits: lits·H = lits·log2 lits - Σ c·log2 c.
	bits := xlog2x[lits]
	for _, c := range hist {
		bits -= xlog2x[c]
	}
	est := bits/8 + matchCost*float64(matches)
	return est > float64(len(s))*(1-maxRandomSaving)
}

// Incompressible reports what a commit's compressible would decide
// first, without compressing anything: that data's sample looks random,
// so zstd is not tried. A writer may judge its blobs itself and say so in
// Blob.Raw (see there).
func Incompressible(data []byte) bool {
	return len(data) >= sampleSize && looksRandom(data[:sampleSize])
}

// quickSample is the sample IncompressibleQuick judges.
const quickSample = 1 << 10

// IncompressibleQuick is Incompressible on a 1 KiB sample: some 2.5
// times cheaper (the parse's table and the entropy sum are a fixed
// cost), and less sure, since a sample that short shows fewer matches.
// The live tree uses it for the other chunks of a write whose first
// chunk Incompressible found random (a 1 MiB write is mostly one kind of
// data): fio's sequential writes spent a fifth of the daemon's CPU in the
// 4 KiB parse, more than in BLAKE3. A wrong answer stores a chunk raw
// that zstd could have shrunk; it never changes the data.
func IncompressibleQuick(data []byte) bool {
	return len(data) >= quickSample && looksRandom(data[:quickSample])
}

const (
	// maxRandomSaving is the estimated saving under which zstd is not
	// tried: under the eighth it must reach, with a margin for the
	// estimate's error.
	maxRandomSaving = 0.10
	// matchCost is about what a short match costs in a zstd block
	// (offset, lengths), in bytes.
	matchCost = 4
	lzBits    = 12
)

// xlog2x holds c·log2 c for every count a sample can give a byte value.
var xlog2x = func() (t [sampleSize + 1]float64) {
	for c := 2; c < len(t); c++ {
		t[c] = float64(c) * math.Log2(float64(c))
	}
	return t
}()
