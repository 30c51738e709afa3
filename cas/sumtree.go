package cas

import (
	"bytes"
	"encoding/binary"
	"sync"
	_ "unsafe" // go:linkname
)

// A chunk's Sum from the hashes of its parts (SumChunk).
//
// BLAKE3 is a Merkle tree: a 64 KiB chunk is 64 1 KiB leaves, and its
// hash the root of a perfect binary tree over them. The chaining value
// (CV) of each 8 KiB subtree (8 leaves) depends on those 8 KiB alone
// (and their position), so when a 4 KiB write changed one page of a
// chunk whose subtree CVs are known, the new hash costs the 8 KiB around
// the page and 14 parent nodes, not 64 KiB (some 4 us instead of 30 us,
// a random 4 KiB writer's biggest single cost). The CVs come from the
// hashing itself (SumChunk records them for the version it names, in a
// bounded map keyed by that name), and a version's are used only for
// the 8 KiB units a new version has byte for byte like it (compared
// with the bytes, not trusted to a writer's page tracking), so the
// result is Sum(data) exactly: TestSumChunkMatchesSum.
//
// zeebo/blake3 does the hashing (its AVX2 code hashes 8 leaves at once,
// and SSE4.1 the parent nodes); its tree functions are internal to it,
// reached by go:linkname (sumtree_link.s): an upgrade of the module that
// changes them fails TestSumChunkMatchesSum, which pins SumChunk to Sum.

//go:linkname blake3HashF github.com/zeebo/blake3/internal/alg.HashF
func blake3HashF(input *[8192]byte, length, counter uint64, flags uint32, key *[8]uint32, out *[64]uint32, chain *[8]uint32)

//go:linkname blake3HashP github.com/zeebo/blake3/internal/alg.HashP
func blake3HashP(left, right *[64]uint32, flags uint32, key *[8]uint32, out *[64]uint32, n int)

//go:linkname blake3Compress github.com/zeebo/blake3/internal/alg.Compress
func blake3Compress(chain *[8]uint32, block *[16]uint32, counter uint64, blen uint32, flags uint32, out *[16]uint32)

const (
	flagParent = 1 << 2
	flagRoot   = 1 << 3
	unitBytes  = 8 << 10               // an 8 KiB subtree: 8 leaves, one HashF
	chunkUnits = ChunkSize / unitBytes // 8
)

var blake3IV = [8]uint32{0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19}

// ChunkCVs are the chaining values of a whole chunk's 8 KiB subtrees.
type ChunkCVs [chunkUnits][8]uint32

// parent returns the CV of the parent of l and r (flags adds flagRoot
// for the root, whose first 8 output words are the hash).
func parent(l, r *[8]uint32, flags uint32) [8]uint32 {
	var block [16]uint32
	copy(block[:8], l[:])
	copy(block[8:], r[:])
	var out [16]uint32
	blake3Compress(&blake3IV, &block, 0, 64, flagParent|flags, &out)
	return [8]uint32(out[:8])
}

// parents returns the CVs of the parents of cvs' pairs (len(cvs) even),
// eight at a time (HashP: AVX2).
func parents(cvs [][8]uint32) [][8]uint32 {
	out := make([][8]uint32, len(cvs)/2)
	for b := 0; b < len(out); b += 8 {
		k := min(8, len(out)-b)
		var l, r, o [64]uint32 // word w of CV i at [8w+i]
		for i := range k {
			for w := range 8 {
				l[8*w+i] = cvs[2*(b+i)][w]
				r[8*w+i] = cvs[2*(b+i)+1][w]
			}
		}
		blake3HashP(&l, &r, flagParent, &blake3IV, &o, k)
		for i := range k {
			for w := range 8 {
				out[b+i][w] = o[8*w+i]
			}
		}
	}
	return out
}

// leaves appends the CVs of the 8 leaves of the 8 KiB subtree u of a
// chunk (p its bytes) to cvs.
func leaves(cvs [][8]uint32, p []byte, u int) [][8]uint32 {
	var out [64]uint32 // word w of leaf i at [8w+i]
	var chain [8]uint32
	blake3HashF((*[unitBytes]byte)(p), unitBytes, uint64(u*unitBytes/1024), 0, &blake3IV, &out, &chain)
	for i := range 8 {
		var cv [8]uint32
		for w := range 8 {
			cv[w] = out[8*w+i]
		}
		cvs = append(cvs, cv)
	}
	return cvs
}

// unitCV returns the CV of the 8 KiB subtree u of a chunk (p its bytes).
func unitCV(p []byte, u int) [8]uint32 {
	return parents(parents(parents(leaves(make([][8]uint32, 0, 8), p, u))))[0]
}

// root returns the hash of a chunk from its units' CVs.
func (c *ChunkCVs) root() Hash {
	top := parents(parents(c[:]))
	cv := parent(&top[0], &top[1], flagRoot)
	var h Hash
	for w := range 8 {
		binary.LittleEndian.PutUint32(h[4*w:], cv[w])
	}
	return h
}

// ChunkSums remembers the ChunkCVs of chunks SumChunk hashed, by their
// hash, up to a bound (some 300 bytes an entry); safe for concurrent use.
// When full it drops an arbitrary entry, as locCache does.
type ChunkSums struct {
	mu  sync.Mutex
	max int
	m   map[Hash]*ChunkCVs
}

// NewChunkSums returns a ChunkSums of at most max entries, or nil (whose
// SumChunk is Sum) when the self-check finds SumChunk differing from Sum.
func NewChunkSums(max int) *ChunkSums {
	if !sumChunkAgrees() {
		return nil
	}
	return &ChunkSums{max: max, m: map[Hash]*ChunkCVs{}}
}

// sumChunkAgrees checks once, on fixed chunks, that SumChunk computes
// Sum: hashed whole, and again from a base after one page changed. The
// functions it reaches by go:linkname are another module's internals; a
// version of it whose functions compute something else is caught here at
// run time (and by TestSumChunkMatchesSum in the tests), and the tree
// then hashes every chunk whole.
var sumChunkAgrees = sync.OnceValue(func() bool {
	data := make([]byte, ChunkSize)
	for i := range data {
		data[i] = byte(i*7 + i>>8)
	}
	s := &ChunkSums{max: 2, m: map[Hash]*ChunkCVs{}}
	h := s.SumChunk(data, Hash{}, nil)
	if h != Sum(data) {
		return false
	}
	next := append([]byte(nil), data...)
	next[3*unitBytes+100] ^= 0xff
	return s.SumChunk(next, h, data) == Sum(next)
})

func (s *ChunkSums) get(h Hash) *ChunkCVs {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[h]
}

// add remembers c as h's CVs, and forgets those of replaced (the version
// h was made from, if not zero): a chunk rewritten in place needs the
// CVs of its newest version only, and a random writer's old versions
// would otherwise fill the map.
func (s *ChunkSums) add(h Hash, c *ChunkCVs, replaced Hash) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !replaced.IsZero() && replaced != h {
		delete(s.m, replaced)
	}
	if _, ok := s.m[h]; !ok && len(s.m) >= s.max {
		for k := range s.m {
			delete(s.m, k)
			break
		}
	}
	s.m[h] = c
}

// Len is the number of chunks remembered.
func (s *ChunkSums) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// SumChunk returns Sum(data) for a whole chunk (len(data) == ChunkSize;
// any other length, or a nil s, is Sum's alone) and remembers its
// subtree CVs in s.
// base and baseData name an earlier version of the chunk and its bytes
// (a read-modify-write's base; zero and nil if none): where base's CVs
// are remembered, each 8 KiB unit of data equal to baseData's takes its
// CV from there instead of being hashed, and base's CVs are forgotten.
// baseData must be the bytes base names, as cas.Blob.BaseData must (the
// live tree's base notes: bytes read and verified, or hashed by itself).
func (s *ChunkSums) SumChunk(data []byte, base Hash, baseData []byte) Hash {
	if s == nil || len(data) != ChunkSize {
		return Sum(data)
	}
	var old *ChunkCVs
	if len(baseData) == ChunkSize && !base.IsZero() {
		old = s.get(base)
	}
	c := new(ChunkCVs)
	if old == nil {
		// Every unit: all 64 leaves, then their parents eight at a
		// time.
		all := make([][8]uint32, 0, ChunkSize/1024)
		for u := range chunkUnits {
			all = leaves(all, data[u*unitBytes:(u+1)*unitBytes], u)
		}
		copy(c[:], parents(parents(parents(all))))
	} else {
		for u := range chunkUnits {
			p := data[u*unitBytes : (u+1)*unitBytes]
			if bytes.Equal(p, baseData[u*unitBytes:(u+1)*unitBytes]) {
				c[u] = old[u]
			} else {
				c[u] = unitCV(p, u)
			}
		}
	}
	h := c.root()
	var replaced Hash
	if old != nil {
		replaced = base
	}
	s.add(h, c, replaced)
	return h
}
