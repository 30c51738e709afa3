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
	b, ok := n.pending[idx]
	if !ok {
		cur, err := t.chunk(n, idx)
		if err != nil {
			return nil, err
		}
		b = make([]byte, len(cur), max(uint64(len(cur)), length))
		copy(b, cur)
		if n.pending == nil {
			n.pending = map[uint64][]byte{}
		}
	}
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
	if !n.IsReg() {
		return ErrInvalid
	}
	if len(p) == 0 {
		return nil // write(2) with count 0 has no other effect
	}
	end := off + uint64(len(p))
	if end > MaxFileSize || end < off {
		return ErrFileTooBig
	}
	for done := 0; done < len(p); {
		pos := off + uint64(done)
		idx, in := pos/cas.ChunkSize, pos%cas.ChunkSize
		want := min(uint64(len(p)-done), cas.ChunkSize-in)
		b, err := t.pendingChunk(n, idx, in+want)
		if err != nil {
			return err
		}
		copy(b[in:], p[done:done+int(want)])
		done += int(want)
	}
	n.Size = max(n.Size, end)
	n.Mtime, n.Ctime = now, now
	return nil
}

// Truncate sets the file size. Shrinking into a chunk rewrites that chunk
// so its stored bytes never reach past the new end.
func (t *Tree) Truncate(n *Node, size uint64, now int64) error {
	if !n.IsReg() {
		return ErrInvalid
	}
	if size > MaxFileSize {
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
			}
		}
		// Committed chunks past the cut become pending holes, so that
		// growing the file again before a flush reads zeros and the flush
		// journals them as holes.
		for idx := count; idx < uint64(len(n.chunks)); idx++ {
			if !n.chunks[idx].IsZero() {
				n.pending[idx] = nil
			}
		}
		if in := size % cas.ChunkSize; in != 0 {
			b, err := t.pendingChunk(n, size/cas.ChunkSize, 0)
			if err != nil {
				return err
			}
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
		if in == 0 && (want == cas.ChunkSize || pos+want == n.Size) {
			n.pending[idx] = nil // a hole
		} else {
			b, err := t.pendingChunk(n, idx, 0)
			if err != nil {
				return err
			}
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

// PendingBytes returns how much written data waits in memory.
func (n *Node) PendingBytes() int {
	s := 0
	for _, b := range n.pending {
		s += cap(b)
	}
	return s
}

// Flush turns the pending buffers into an OpData record and the chunk
// objects it references (the blobs alias the buffers, so the caller drops
// the buffers with ClearPending rather than writing to them again). An
// all-zero chunk becomes a hole. kind is one of journal.Data*.
func (t *Tree) Flush(n *Node, kind uint8) (*journal.Record, []cas.Blob) {
	r := &journal.Record{Op: journal.OpData, Ino: n.Ino, Size: n.Size, Kind: kind, Mtime: n.Mtime}
	var blobs []cas.Blob
	count := chunkCount(n.Size)
	for _, idx := range sortedIdx(n.pending) {
		if idx >= count {
			continue
		}
		b := n.pending[idx]
		b = b[:min(uint64(len(b)), chunkLen(n.Size, idx))]
		var h cas.Hash
		if !allZero(b) {
			h = cas.Sum(b)
			blobs = append(blobs, cas.Blob{Hash: h, Data: b})
		}
		r.Chunks = append(r.Chunks, journal.Chunk{Index: idx, Hash: h})
	}
	return r, blobs
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
