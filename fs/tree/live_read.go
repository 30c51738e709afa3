package tree

import (
	"fmt"

	"github.com/reynfs/reynfs/cas"
)

// zeros backs the holes and short chunks of ReadVec's slices (never
// written).
var zeros [cas.ChunkSize]byte

// ReadVec returns the bytes of file ino at [off, off+size) as slices for
// a scatter-gather reply. A chunk the request covers from its start is
// read from the store straight into its place in scratch (at least size
// long), unless the store's cache has it: no allocation, and a big
// sequential read does not flush the cache (the kernel's page cache keeps
// what it reads). A chunk read from the middle comes from the cache
// (cas.Badger.Get caches it: small random reads hit the same chunks).
// Holes and the zero tail of a short chunk are slices of a shared zero
// chunk, and chunks written but not yet journaled, which a later write
// changes in place, are copied into scratch. The slices must not be
// modified. It returns the slices and their total length (short at end
// of file).
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
			var data []byte
			var err error
			if in == 0 {
				// The whole chunk is wanted (unless the request ends
				// inside it): read it into its place in scratch.
				data, err = l.chunkInto(n, idx, scratch[done:done+want])
			} else {
				data, err = l.t.chunk(n, idx)
			}
			if err != nil {
				return nil, 0, err
			}
			have := 0
			if in < uint64(len(data)) {
				have = min(want, len(data)-int(in))
				vecs = append(vecs, data[in:int(in)+have])
			}
			if have < want {
				vecs = append(vecs, zeros[:want-have])
			}
		}
		done += want
	}
	return vecs, size, nil
}

// chunkInto returns the committed (or staged) bytes of chunk idx, read
// into dst when the store can and they fit (cas.IntoGetter), else shared.
func (l *Live) chunkInto(n *Node, idx uint64, dst []byte) ([]byte, error) {
	if idx >= uint64(len(n.chunks)) || n.chunks[idx].IsZero() {
		return nil, nil
	}
	h := n.chunks[idx]
	b, err := l.stage.getInto(h, dst)
	if err != nil {
		return nil, fmt.Errorf("read inode %d chunk %d: %w", n.Ino, idx, err)
	}
	return b, nil
}

// getInto is Get for a store that can read into dst (cas.IntoGetter): the
// staged and recent chunks first, as Get, then the store.
func (s *staging) getInto(h cas.Hash, dst []byte) ([]byte, error) {
	g, ok := s.Store.(cas.IntoGetter)
	if !ok {
		return s.Get(h)
	}
	s.mu.Lock()
	if b, ok := s.blobs[h]; ok {
		s.mu.Unlock()
		return b.data, nil
	}
	if el, ok := s.recent[h]; ok {
		s.order.MoveToFront(el)
		s.mu.Unlock()
		return el.Value.(*recentBlob).data, nil
	}
	s.mu.Unlock()
	return g.GetInto(h, dst)
}
