package tree

import (
	"bytes"

	"github.com/reynfs/reynfs/cas"
)

// What the tree notes beside a file's pending chunks, per chunk slot:
// the hash of a pending buffer (sums), the stored chunk it was read from
// (bases) and the stored chunk a truncation cut (cuts). Each is a map
// from node to slot index, kept in step with the buffers by content.go.

// slotsOf returns n's slot map in *m, making both as needed.
func slotsOf[V any](m *map[*Node]map[uint64]V, n *Node) map[uint64]V {
	if *m == nil {
		*m = map[*Node]map[uint64]V{}
	}
	s := (*m)[n]
	if s == nil {
		s = map[uint64]V{}
		(*m)[n] = s
	}
	return s
}

// sum notes h as the hash of n's pending chunk idx, whose buffer holds
// exactly the bytes hashed; unsum forgets it before the buffer changes.
// Every change of a pending buffer goes through pendingChunkFrom, Truncate,
// ZeroRange or WriteAtFrom, which keep the two in step.
func (t *Tree) sum(n *Node, idx uint64, h ChunkSum) {
	slotsOf(&t.sums, n)[idx] = h
}

func (t *Tree) unsum(n *Node, idx uint64) {
	if m := t.sums[n]; m != nil {
		delete(m, idx)
	}
}

// setBase notes b, the stored chunk (hash and verified bytes) that n's
// pending chunk idx was read from for a read-modify-write: Flush names it
// as the new chunk's Blob.Base and hands its bytes in, so the store can
// keep a chunk a 4 KiB write changed as a delta of some 4 KiB against it
// instead of 64 KiB again (an fsync'd append, a database page, a random
// writer), without reading the base back. unbase forgets it when the
// slot is replaced wholly (a whole-chunk write, a hole, a cut): a delta
// against unrelated bytes is only work for the committer.
//
// pooled says that b.Data is a buffer of the staging's pool
// (staging.GetOnceInto) that the note now owns: it goes back to the pool
// when the note goes. A note is never read by a commit (Flush copies it
// into the blob's BaseData and Live.flush drops the notes of what it
// journaled right after enqueueing), so unbase and a replaced note give
// it back at once, and Live.flush once the commit is done (dropPending).
func (t *Tree) setBase(n *Node, idx uint64, b cas.Blob, pooled bool) {
	m := slotsOf(&t.bases, n)
	if old, ok := m[idx]; ok && old.pooled {
		t.recycleBuf(old.Data)
	}
	m[idx] = baseNote{Blob: b, pooled: pooled}
}

// baseNote is a base (setBase) and whether its bytes are a pooled buffer
// the note owns.
type baseNote struct {
	cas.Blob
	pooled bool
}

// recycleBuf hands a pooled buffer back (Tree.recycle), when the tree has
// somewhere to hand it.
func (t *Tree) recycleBuf(b []byte) {
	if t.recycle != nil {
		t.recycle(b)
	}
}

// touch notes that bytes [from, to) of n's pending chunk idx are being
// written (or cleared) in a chunk read from a base: Flush hands the
// store the pages changed since (Blob.Pages), so that its delta compares
// those pages only. Every change of a read-modify-written buffer goes
// through WriteAtFrom, ZeroRange or Truncate, which call it; the store
// checks the other pages' CRCs against the base's all the same.
func (t *Tree) touch(n *Node, idx, from, to uint64) {
	m := t.bases[n]
	if m == nil {
		return
	}
	b, ok := m[idx]
	if !ok || to <= from {
		return
	}
	first, last := from/pageBytes, (to-1)/pageBytes
	if last >= 64 {
		b.Pages = ^uint64(0)
	} else {
		b.Pages |= (1<<(last+1) - 1) &^ (1<<first - 1)
	}
	m[idx] = b
}

// pageBytes is the unit of Blob.Pages.
const pageBytes = 4096

func (t *Tree) unbase(n *Node, idx uint64) {
	if m := t.bases[n]; m != nil {
		if old, ok := m[idx]; ok && old.pooled {
			t.recycleBuf(old.Data)
		}
		delete(m, idx)
	}
}

// maxChunkSums bounds the chunks whose subtree hashes the tree remembers
// (Tree.chunkSums): some 300 bytes each, 10 MiB for 2 GiB of chunks
// rewritten in place.
const maxChunkSums = 1 << 15

// maxCutNodes bounds the nodes whose cut chunks the tree remembers (see
// Tree.cuts): a file truncated and never written again keeps its entry
// until the next flush of its data, so past this many the hints start
// over.
const maxCutNodes = 4096

// maxLineageChunk bounds the new chunks Flush names a cut chunk as Base
// for: the committer reads such a base itself (a cold read), which is
// worth it for a small file rewritten whole (a source file an editor or
// a generator writes again: a delta of a few dozen bytes instead of the
// file, docs/storage.md) but would double the reads of a big file copied
// over an old one.
const maxLineageChunk = 16 << 10

// noteCut remembers that a truncation cut the stored chunk h from slot
// idx of n (see Tree.cuts).
func (t *Tree) noteCut(n *Node, idx uint64, h cas.Hash) {
	if len(t.cuts) >= maxCutNodes && t.cuts[n] == nil {
		t.cuts = nil
	}
	m := slotsOf(&t.cuts, n)
	if _, ok := m[idx]; !ok { // the oldest cut is what the store holds
		m[idx] = h
	}
}

// dropSums forgets the hashes and bases noted for n's pending chunks
// (see sum and setBase), when its buffers are dropped. It returns the
// pooled buffers of the bases, which the caller now owns (Live.dropPending
// gives them back once the commit that read them is done).
func (t *Tree) dropSums(n *Node) (pooled [][]byte) {
	delete(t.sums, n)
	for _, b := range t.bases[n] {
		if b.pooled {
			pooled = append(pooled, b.Data)
		}
	}
	delete(t.bases, n)
	return pooled
}

// growNote is the hashing state of a node's last, partial chunk as a
// flush left it (Tree.grows): s has summed exactly the bytes of the chunk
// named hash, in slot idx.
type growNote struct {
	idx  uint64
	hash cas.Hash
	s    *cas.Summer
}

// maxGrowNodes bounds the nodes with a growNote (some 11 KiB each): past
// this many the notes start over.
const maxGrowNodes = 64

// grownSum returns cas.Sum(b) for n's pending chunk idx, whose buffer b
// was made from the stored chunk base (its read-modify-write: bases).
// When n's grow note holds the BLAKE3 state after exactly base's bytes
// and b still starts with them (an append: compared, not assumed), only
// the tail is hashed, and the note moves on to b. Else, for a slot that
// may grow again (keep: the file's last chunk, not full), b is hashed
// into a new note, returned for the caller to store (Flush hashes chunks
// in parallel and keeps the map out of it); otherwise plain cas.Sum.
func (t *Tree) grownSum(n *Node, idx uint64, b []byte, base cas.Blob, keep bool) (cas.Hash, *growNote) {
	if g := t.grows[n]; g != nil && g.idx == idx && g.hash == base.Hash &&
		g.s.Len() == int64(len(base.Data)) && len(b) >= len(base.Data) && bytes.Equal(b[:len(base.Data)], base.Data) {
		if !keep {
			s := g.s.Clone()
			s.Write(b[len(base.Data):])
			return s.Sum(), nil
		}
		// The note is this slot's alone: Flush calls grownSum once per
		// slot, and a node's note names one slot.
		g.s.Write(b[len(base.Data):])
		g.hash = g.s.Sum()
		return g.hash, nil
	}
	if !keep {
		// A chunk patched in place (a random writer's): its base's
		// subtree hashes, when remembered, spare hashing what the
		// writes did not change (cas.ChunkSums).
		return t.chunkSums.SumChunk(b, base.Hash, base.Data), nil
	}
	s := cas.NewSummer()
	s.Write(b)
	h := s.Sum()
	return h, &growNote{idx: idx, hash: h, s: s}
}

// noteGrow stores g as n's grow note (see grownSum).
func (t *Tree) noteGrow(n *Node, g *growNote) {
	if t.grows == nil || len(t.grows) >= maxGrowNodes && t.grows[n] == nil {
		t.grows = map[*Node]*growNote{}
	}
	t.grows[n] = g
}
