package tree

import (
	"fmt"

	"github.com/reynfs/reynfs/cas"
)

// zeros backs the holes and short chunks of ReadVec's slices (never
// written).
var zeros [cas.ChunkSize]byte

// ReadVec returns the bytes of file ino at [off, off+size) as slices for
// a scatter-gather reply. The pages a request wants of a journaled chunk
// are read from the store straight into their place in scratch (at least
// size long) unless the store's cache has the chunk (cas.RangeReader): no
// allocation, and a big sequential read does not flush the cache (the
// kernel's page cache keeps what it reads). Holes and the zero tail of a
// short chunk are slices of a shared zero chunk, and chunks written but
// not yet journaled, which a later write changes in place, are copied
// into scratch. The slices must not be modified. It returns the slices
// and their total length (short at end of file).
func (l *Live) ReadVec(ino uint64, off uint64, size int, scratch []byte) ([][]byte, int, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n, err := l.node(ino)
	if err != nil {
		return nil, 0, err
	}
	if n.IsDir() {
		return nil, 0, ErrIsDir
	}
	if !n.IsReg() {
		return nil, 0, ErrInvalid
	}
	if off >= n.Size {
		return nil, 0, nil
	}
	size = int(min(uint64(size), n.Size-off))
	vecs := make([][]byte, 0, size/cas.ChunkSize+2)
	for done := 0; done < size; {
		pos := off + uint64(done)
		idx, in := pos/cas.ChunkSize, pos%cas.ChunkSize
		want := int(min(uint64(size-done), cas.ChunkSize-in))
		if b, ok := n.pending[idx]; ok {
			dst := scratch[done : done+want]
			copied := 0
			if in < uint64(len(b)) {
				copied = copy(dst, b[in:])
			}
			clear(dst[copied:])
			vecs = append(vecs, dst)
		} else {
			data, err := l.chunkRange(n, idx, int(in), scratch[done:done+want])
			if err != nil {
				return nil, 0, err
			}
			if len(data) > 0 {
				vecs = append(vecs, data)
			}
			if len(data) < want {
				vecs = append(vecs, zeros[:want-len(data)])
			}
		}
		done += want
	}
	return vecs, size, nil
}

// chunkRange returns the committed (or staged) bytes of chunk idx from
// off on, at most len(dst) of them: read into dst where the store can
// (cas.RangeReader), else shared with the store or the staging area.
func (l *Live) chunkRange(n *Node, idx uint64, off int, dst []byte) ([]byte, error) {
	if idx >= uint64(len(n.chunks)) || n.chunks[idx].IsZero() {
		return nil, nil
	}
	b, err := l.stage.readRange(n.chunks[idx], off, dst)
	if err != nil {
		return nil, fmt.Errorf("read inode %d chunk %d: %w", n.Ino, idx, err)
	}
	return b, nil
}

// readRange is Get for part of an object, read into dst by a store that
// can (cas.RangeReader): the staged and recent chunks first, as Get.
func (s *staging) readRange(h cas.Hash, off int, dst []byte) ([]byte, error) {
	r, ok := s.Store.(cas.RangeReader)
	if ok {
		s.mu.Lock()
		if b, held := s.blobs[h]; held {
			s.mu.Unlock()
			return clip(b.data, off, len(dst)), nil
		}
		if el, held := s.recent[h]; held {
			s.order.MoveToFront(el)
			s.mu.Unlock()
			return clip(el.Value.(*recentBlob).data, off, len(dst)), nil
		}
		s.mu.Unlock()
		return r.ReadRange(h, off, dst)
	}
	b, err := s.Get(h)
	if err != nil {
		return nil, err
	}
	return clip(b, off, len(dst)), nil
}

// clip returns b[off:off+n], cut at the end of b.
func clip(b []byte, off, n int) []byte {
	if off >= len(b) {
		return nil
	}
	return b[off:min(off+n, len(b))]
}
