package tree

import "github.com/reynfs/reynfs/cas"

// zeros backs the holes and short chunks of ReadVec's slices (never
// written).
var zeros [cas.ChunkSize]byte

// ReadVec returns the bytes of file ino at [off, off+size) as slices for
// a scatter-gather reply, without copying committed chunks: those slices
// are the store's objects (immutable), holes and the zero tail of a short
// chunk are slices of a shared zero chunk, and only chunks written but not
// yet journaled, which a later write changes in place, are copied into
// scratch (at least size long). The slices must not be modified. It
// returns the slices and their total length (short at end of file).
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
			data, err := l.t.chunk(n, idx)
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
