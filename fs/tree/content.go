package tree

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// File content is a list of fixed-size chunks named by hash; the zero hash
// is a hole. A chunk's stored bytes may be shorter than its slot (the rest
// reads as zeros) but never longer than the slot was when it was stored:
// truncating into a chunk rewrites it, so growing the file again shows
// zeros, not old bytes.
//
// Writes land in pending chunk buffers first; Flush turns them into one
// OpData record. The chunk list itself changes only through Apply.

// MaxWriteSize bounds the size a write, truncate or fallocate may give a
// file (EFBIG past it). A file's inode object lists one 32-byte hash per
// 64 KiB chunk slot, holes included, and must fit one Badger value
// (ValueLogFileSize, 128 MiB) or the generation cut that stores it fails
// and the mount goes read-only: 192 GiB makes 96 MiB of hashes, which
// leaves room for MaxXattrBytes of attributes. Replay keeps accepting
// records up to MaxFileSize, as earlier versions wrote.
const MaxWriteSize = 192 << 30

// ReadAt reads file content at off into p, zero-filling holes, and returns
// the number of bytes read (short at end of file).
func (t *Tree) ReadAt(n *Node, p []byte, off uint64) (int, error) {
	if !n.IsReg() {
		return 0, ErrInvalid
	}
	if off >= n.Size {
		return 0, nil
	}
	p = p[:min(uint64(len(p)), n.Size-off)]
	done := 0
	for done < len(p) {
		pos := off + uint64(done)
		idx, in := pos/cas.ChunkSize, pos%cas.ChunkSize
		want := min(uint64(len(p)-done), cas.ChunkSize-in)
		data, err := t.chunk(n, idx)
		if err != nil {
			return done, err
		}
		dst := p[done : done+int(want)]
		copied := 0
		if in < uint64(len(data)) {
			copied = copy(dst, data[in:])
		}
		clear(dst[copied:])
		done += int(want)
	}
	return done, nil
}

// chunk returns the current bytes of chunk idx (pending or committed).
func (t *Tree) chunk(n *Node, idx uint64) ([]byte, error) {
	if b, ok := n.pending[idx]; ok {
		return b, nil
	}
	if idx >= uint64(len(n.chunks)) || n.chunks[idx].IsZero() {
		return nil, nil
	}
	b, err := t.store.Get(n.chunks[idx])
	if err != nil {
		return nil, fmt.Errorf("read inode %d chunk %d: %w", n.Ino, idx, err)
	}
	return b, nil
}

// pendingChunk returns a writable buffer for chunk idx holding its current
// bytes, at least length long. A pending buffer's bytes between its length
// and its capacity are always zero.
func (t *Tree) pendingChunk(n *Node, idx, length uint64) ([]byte, error) {
	return t.pendingChunkFrom(n, idx, length, nil, nil)
}

// Prefetched holds stored chunks read before the caller took its lock,
// by chunk index (see Live.WriteAt). A chunk is used only if the slot
// still names the same hash: the bytes of a hash never change.
type Prefetched map[uint64]cas.Blob

// pendingChunkFrom is pendingChunk that takes the current bytes from pre
// when they are there. A chunk of pre in a pooled buffer (pooled, see
// Prepared) that becomes the slot's base goes to its note with the
// buffer: it is then deleted from pooled, which keeps those the caller
// must give back.
func (t *Tree) pendingChunkFrom(n *Node, idx, length uint64, pre Prefetched, pooled map[uint64]bool) ([]byte, error) {
	b, ok := n.pending[idx]
	if !ok {
		var cur []byte
		fromPool := false
		if p, hit := pre[idx]; hit && idx < uint64(len(n.chunks)) && n.chunks[idx] == p.Hash {
			cur, fromPool = p.Data, pooled[idx]
		} else {
			var err error
			if cur, err = t.chunk(n, idx); err != nil {
				return nil, err
			}
		}
		if len(cur) > 0 {
			t.setBase(n, idx, cas.Blob{Hash: n.chunks[idx], Data: cur}, fromPool)
			if fromPool {
				delete(pooled, idx)
			}
		}
		if uint64(len(cur)) >= length {
			// A copy of the stored chunk, not make and copy: the
			// buffer is not cleared first (a random write's
			// read-modify-write of a whole chunk).
			b = append([]byte(nil), cur...)
		} else {
			b = make([]byte, len(cur), length)
			copy(b, cur)
		}
		if n.pending == nil {
			n.pending = map[uint64][]byte{}
		}
	}
	t.unsum(n, idx) // the caller writes into b
	if uint64(len(b)) < length {
		if uint64(cap(b)) < length {
			// Grow by doubling up to a chunk: a small file's write does
			// not cost (and clear) a whole 64 KiB buffer.
			nb := make([]byte, len(b), min(cas.ChunkSize, max(length, 2*uint64(cap(b)))))
			copy(nb, b)
			b = nb
		}
		b = b[:length] // bytes past len are zero up to the capacity
	}
	n.pending[idx] = b
	return b, nil
}

// WriteAt writes p at off into pending buffers, growing the file as needed.
func (t *Tree) WriteAt(n *Node, p []byte, off uint64, now int64) error {
	return t.WriteAtFrom(n, p, off, now, nil)
}

// Prepared is what a write works out before it takes the live lock: the
// stored chunks its read-modify-write needs (Old), and for the whole chunk
// slots p covers, their new buffers and sums (Bufs and Sums, see
// WholeChunks), so that neither a store read nor the copying and hashing
// of a sequential writer's chunks runs while every other request waits.
type Prepared struct {
	Old Prefetched
	// At is the offset Bufs and Sums were made for: a write that lands
	// elsewhere (an append that lost a race for the end) ignores them.
	At   uint64
	Bufs [][]byte
	Sums []ChunkSum
	// Lent is set when Bufs are the written bytes themselves, not
	// copies (see Live.WriteAt): the write must not return while
	// anything but its own flush's commit holds them.
	Lent bool
	// pooled marks the chunks of Old read into buffers of the
	// staging's pool (staging.GetOnceInto). The one a slot takes as its
	// base goes to the base's note (pendingChunkFrom deletes it here);
	// the write gives back those left (Live.recycleUnused).
	pooled map[uint64]bool
}

// WriteAtFrom is WriteAt that takes what the caller prepared before its
// lock where it still holds (see Prepared); pre may be nil.
func (t *Tree) WriteAtFrom(n *Node, p []byte, off uint64, now int64, pre *Prepared) error {
	if !n.IsReg() {
		return ErrInvalid
	}
	if len(p) == 0 {
		return nil // write(2) with count 0 has no other effect
	}
	end := off + uint64(len(p))
	if end > MaxWriteSize || end < off {
		return ErrFileTooBig
	}
	var old Prefetched
	var pooled map[uint64]bool
	var bufs [][]byte
	var sums []ChunkSum
	if pre != nil {
		old, pooled = pre.Old, pre.pooled
		if pre.At == off && len(pre.Bufs) == len(pre.Sums) {
			bufs, sums = pre.Bufs, pre.Sums
		}
	}
	whole := 0 // whole slots passed so far: the index in bufs and sums
	for done := 0; done < len(p); {
		pos := off + uint64(done)
		idx, in := pos/cas.ChunkSize, pos%cas.ChunkSize
		want := min(uint64(len(p)-done), cas.ChunkSize-in)
		if in == 0 && want == cas.ChunkSize {
			// The whole slot is overwritten: its stored bytes would
			// be read only to be replaced.
			if n.pending == nil {
				n.pending = map[uint64][]byte{}
			}
			t.unbase(n, idx)
			if whole < len(bufs) {
				// The copy made before the lock, which holds
				// exactly the bytes summed.
				n.pending[idx] = bufs[whole]
				t.sum(n, idx, sums[whole])
			} else {
				if b, pend := n.pending[idx]; !pend || cap(b) < cas.ChunkSize {
					// A copy, not make and copy: the buffer is
					// not cleared first.
					n.pending[idx] = bytes.Clone(p[done : done+int(want)])
				} else {
					copy(b[:cas.ChunkSize], p[done:done+int(want)])
					n.pending[idx] = b[:cas.ChunkSize]
				}
				t.unsum(n, idx)
			}
			whole++
			done += int(want)
			continue
		}
		b, err := t.pendingChunkFrom(n, idx, in+want, old, pooled)
		if err != nil {
			return err
		}
		t.touch(n, idx, in, in+want)
		copy(b[in:], p[done:done+int(want)])
		done += int(want)
	}
	n.Size = max(n.Size, end)
	n.Mtime, n.Ctime = now, now
	return nil
}

// ownLent replaces each of n's pending buffers that is one of bufs (a
// write's lent bytes, see Prepared.Lent) by a copy of it, for a write
// that fails with them still pending: they must not outlive its request.
func (t *Tree) ownLent(n *Node, bufs [][]byte) {
	if len(bufs) == 0 || len(n.pending) == 0 {
		return
	}
	lent := make(map[*byte]bool, len(bufs))
	for _, b := range bufs {
		lent[&b[0]] = true
	}
	for idx, b := range n.pending {
		if len(b) > 0 && lent[&b[0]] {
			n.pending[idx] = bytes.Clone(b)
		}
	}
}

// ToRead lists, by chunk index, the stored chunks a write of length
// bytes at off would have to read (read-modify-write): slots that hold a
// stored chunk, have no pending buffer and are not wholly overwritten.
// Only the hashes are set. Caller holds the tree's lock (a read lock is
// enough).
func (t *Tree) ToRead(n *Node, off, length uint64) Prefetched {
	if !n.IsReg() || length == 0 || off+length < off {
		return nil
	}
	var out Prefetched
	last := (off + length - 1) / cas.ChunkSize
	for idx := off / cas.ChunkSize; idx <= last && idx < uint64(len(n.chunks)); idx++ {
		start, end := idx*cas.ChunkSize, (idx+1)*cas.ChunkSize
		if _, pend := n.pending[idx]; pend || n.chunks[idx].IsZero() || off <= start && off+length >= end {
			continue
		}
		if out == nil {
			out = Prefetched{}
		}
		out[idx] = cas.Blob{Hash: n.chunks[idx]}
	}
	return out
}

// Truncate sets the file size. Shrinking into a chunk rewrites that chunk
// so its stored bytes never reach past the new end.
func (t *Tree) Truncate(n *Node, size uint64, now int64) error {
	if !n.IsReg() {
		return ErrInvalid
	}
	if size > MaxWriteSize {
		return ErrFileTooBig
	}
	if n.pending == nil {
		n.pending = map[uint64][]byte{} // the size alone is news for the journal
	}
	if size < n.Size {
		count := chunkCount(size)
		for idx := range n.pending {
			if idx >= count {
				delete(n.pending, idx)
				t.unsum(n, idx)
				t.unbase(n, idx)
			}
		}
		// Committed chunks past the cut become pending holes, so that
		// growing the file again before a flush reads zeros and the flush
		// journals them as holes.
		for idx := count; idx < uint64(len(n.chunks)); idx++ {
			if !n.chunks[idx].IsZero() {
				n.pending[idx] = nil
				t.noteCut(n, idx, n.chunks[idx])
			}
		}
		if in := size % cas.ChunkSize; in != 0 {
			b, err := t.pendingChunk(n, size/cas.ChunkSize, 0)
			if err != nil {
				return err
			}
			t.touch(n, size/cas.ChunkSize, 0, cas.ChunkSize)
			if uint64(len(b)) > in {
				clear(b[in:]) // keep bytes past len zero
				n.pending[size/cas.ChunkSize] = b[:in]
			}
		}
	}
	n.Size = size
	n.Mtime, n.Ctime = now, now
	return nil
}

// ZeroRange turns [off, off+length) into zeros without changing the size
// (fallocate PUNCH_HOLE / ZERO_RANGE). Whole chunks become holes.
func (t *Tree) ZeroRange(n *Node, off, length uint64, now int64) error {
	if !n.IsReg() {
		return ErrInvalid
	}
	end := min(off+length, n.Size)
	if n.pending == nil {
		n.pending = map[uint64][]byte{}
	}
	for pos := off; pos < end; {
		idx, in := pos/cas.ChunkSize, pos%cas.ChunkSize
		want := min(end-pos, cas.ChunkSize-in)
		if _, pend := n.pending[idx]; !pend && (idx >= uint64(len(n.chunks)) || n.chunks[idx].IsZero()) {
			// Already a hole: zeroing it changes nothing, and a sparse
			// file's punch costs no memory per slot.
		} else if in == 0 && (want == cas.ChunkSize || pos+want == n.Size) {
			n.pending[idx] = nil // a hole
			t.unsum(n, idx)
			t.unbase(n, idx)
		} else {
			b, err := t.pendingChunk(n, idx, 0)
			if err != nil {
				return err
			}
			t.touch(n, idx, in, in+want)
			if in < uint64(len(b)) {
				clear(b[in:min(uint64(len(b)), in+want)])
			}
		}
		pos += want
	}
	n.Mtime, n.Ctime = now, now
	return nil
}

// Dirty reports whether the file holds written data not yet journaled, or
// a size the journal does not know.
func (n *Node) Dirty() bool { return n.pending != nil }

// PendingBytes returns how much written data waits in memory. Each data
// buffer counts at least minSlotBytes, so that the flush it triggers at
// FileBufferBytes bounds the number of chunk entries in one record too
// (1-byte writes 64 KiB apart would otherwise gather a million entries, a
// record the journal refuses).
func (n *Node) PendingBytes() int {
	s := 0
	for _, b := range n.pending {
		if b != nil {
			s += max(cap(b), minSlotBytes)
		}
	}
	return s
}

// minSlotBytes is the least a pending chunk buffer counts for.
const minSlotBytes = 4 << 10

// Flush turns the pending buffers into an OpData record and the chunk
// objects it references (the blobs alias the buffers, so the caller drops
// the buffers with ClearPending rather than writing to them again). An
// all-zero chunk becomes a hole; runs of holes become hole ranges, so a
// punch-hole of any length is a record of a few bytes. kind is one of
// journal.Data*.
//
// A whole chunk a write summed before it took the lock (Prepared.Sums)
// is not hashed again; the others are hashed here, on several CPUs when
// there are several: the caller holds the live lock meanwhile.
func (t *Tree) Flush(n *Node, kind uint8) (*journal.Record, []cas.Blob) {
	r := &journal.Record{Op: journal.OpData, Ino: n.Ino, Size: n.Size, Kind: kind, Mtime: n.Mtime}
	count := chunkCount(n.Size)
	idxs := sortedIdx(n.pending)
	bufs := make([][]byte, 0, len(idxs))
	sums := make([]ChunkSum, 0, len(idxs))
	var todo [][]byte // the buffers still to hash, and where their hashes go
	var at []int
	var idxOf []uint64 // and their chunk indexes
	known := t.sums[n]
	for _, idx := range idxs {
		if idx >= count {
			continue
		}
		b := n.pending[idx]
		b = b[:min(uint64(len(b)), chunkLen(n.Size, idx))]
		bufs = append(bufs, b)
		if h, ok := known[idx]; ok && len(b) == cas.ChunkSize {
			sums = append(sums, h)
			continue
		}
		sums = append(sums, ChunkSum{})
		todo = append(todo, b)
		at = append(at, len(sums)-1)
		idxOf = append(idxOf, idx)
	}
	bases := t.bases[n]
	if len(bases) > 0 && t.chunkSums == nil {
		t.chunkSums = cas.NewChunkSums(maxChunkSums)
	}
	grows := make([]*growNote, len(todo)) // new grow notes, by todo index
	parallel(len(todo), len(todo)*cas.ChunkSize, func(i int) {
		if base, based := bases[idxOf[i]]; based && !allZero(todo[i]) {
			// Most likely stored as a delta: the committer judges
			// its compressibility only if that fails. An append to
			// the last chunk hashes the appended bytes only.
			keep := idxOf[i] == count-1 && len(todo[i]) < cas.ChunkSize
			h, g := t.grownSum(n, idxOf[i], todo[i], base.Blob, keep)
			sums[at[i]] = ChunkSum{Hash: h}
			if g != nil {
				grows[i] = g
			}
			return
		}
		sums[at[i]] = sumOf(todo[i])
	})
	for _, g := range grows {
		if g != nil {
			t.noteGrow(n, g)
		}
	}
	cuts := t.cuts[n]
	var blobs []cas.Blob
	k := 0
	for _, idx := range idxs {
		if idx >= count {
			continue
		}
		b, sum := bufs[k], sums[k]
		k++
		if sum.Hash.IsZero() { // all zeros
			if j := len(r.Holes) - 1; j >= 0 && r.Holes[j].Start+r.Holes[j].Count == idx {
				r.Holes[j].Count++
			} else {
				r.Holes = append(r.Holes, journal.HoleRange{Start: idx, Count: 1})
			}
			continue
		}
		bl := cas.Blob{Hash: sum.Hash, Data: b, Raw: sum.Raw}
		if base, ok := bases[idx]; ok {
			// The note's bytes, pooled or not, stay the tree's
			// until the commit is done (Live.flush).
			bl.Base, bl.BaseData, bl.Pages = base.Hash, base.Data, base.Pages
		} else if cut, ok := cuts[idx]; ok && len(b) <= maxLineageChunk {
			bl.Base, bl.Chunk = cut, true
		}
		blobs = append(blobs, bl)
		r.Chunks = append(r.Chunks, journal.Chunk{Index: idx, Hash: sum.Hash})
	}
	if len(r.Chunks) > 0 {
		delete(t.cuts, n) // the data that follows a cut has been written
	}
	return r, blobs
}

// punch makes the chunk slots of hs holes (an OpData record's Holes; the
// caller has checked that they lie below the size).
func (n *Node) punch(hs []journal.HoleRange) {
	for _, h := range hs {
		for _, c := range n.chunks[h.Start : h.Start+h.Count] {
			if !c.IsZero() {
				n.holes++
			}
		}
		clear(n.chunks[h.Start : h.Start+h.Count])
	}
}

// ClearPending drops the pending buffers once their record is applied.
func (n *Node) ClearPending() { n.pending = nil }

var zeroChunk [cas.ChunkSize]byte

// allZero reports whether b (at most a chunk) holds only zero bytes.
func allZero(b []byte) bool {
	for len(b) > len(zeroChunk) {
		if !bytes.Equal(b[:len(zeroChunk)], zeroChunk[:]) {
			return false
		}
		b = b[len(zeroChunk):]
	}
	return bytes.Equal(b, zeroChunk[:len(b)])
}

func sortedIdx(m map[uint64][]byte) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
