package tree

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

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
//
// The store is read after the lock is released: the chunk hashes taken
// under it name bytes that never change, and a read from disk no longer
// holds up every writer (and, behind a waiting writer, every other
// request). The kernel keeps the pages of a READ locked until the reply,
// so a write or a rewind's invalidation of them waits for it as before.
// Only a chunk a concurrent write replaced and the collector swept since
// can be gone: then the read is done again, under the lock.
func (l *Live) ReadVec(ino uint64, off uint64, size int, scratch []byte) ([][]byte, int, error) {
	vecs, reads, n, err := l.planRead(ino, off, size, scratch, false)
	if err == nil && len(reads) > 0 {
		if l.afterPlan != nil {
			l.afterPlan()
		}
		err = l.fill(ino, vecs, reads, scratch)
		if errors.Is(err, cas.ErrNotFound) {
			vecs, _, n, err = l.planRead(ino, off, size, scratch, true)
		}
	}
	if err != nil {
		return nil, 0, err
	}
	out := vecs[:0]
	for _, v := range vecs {
		if len(v) > 0 {
			out = append(out, v)
		}
	}
	return out, n, nil
}

// chunkRead is a journaled chunk's part of a read: chunk idx, named h,
// from in on, want bytes, into scratch at done and vecs at slot (its zero
// tail, if short, at slot+1).
type chunkRead struct {
	h          cas.Hash
	idx        uint64
	in         int
	want, done int
	slot       int
}

// planRead fills in under the read lock what it can of a read (holes,
// write buffers) and lists the journaled chunks it needs, which it also
// reads before unlocking when locked is set. vecs has two slots per chunk
// (bytes, zero tail), some left empty.
func (l *Live) planRead(ino uint64, off uint64, size int, scratch []byte, locked bool) ([][]byte, []chunkRead, int, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n, err := l.node(ino)
	if err != nil {
		return nil, nil, 0, err
	}
	if n.IsDir() {
		return nil, nil, 0, ErrIsDir
	}
	if !n.IsReg() {
		return nil, nil, 0, ErrInvalid
	}
	if off >= n.Size {
		return nil, nil, 0, nil
	}
	size = int(min(uint64(size), n.Size-off))
	vecs := make([][]byte, 0, 2*(size/cas.ChunkSize+2))
	reads := make([]chunkRead, 0, size/cas.ChunkSize+2)
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
		} else if idx >= uint64(len(n.chunks)) || n.chunks[idx].IsZero() {
			vecs = append(vecs, zeros[:want])
		} else {
			reads = append(reads, chunkRead{h: n.chunks[idx], idx: idx, in: int(in), want: want, done: done, slot: len(vecs)})
			vecs = append(vecs, nil, nil)
		}
		done += want
	}
	if locked {
		if err := l.fill(ino, vecs, reads, scratch); err != nil {
			return nil, nil, 0, err
		}
	}
	return vecs, reads, size, nil
}

// fillWorkers bounds the goroutines one read uses for its chunks (a
// variable for the benchmarks).
var fillWorkers = 4

// fill reads the chunks of a planned read into their slots, several at a
// time when there are several. A sequential reader has one or two READs
// in flight (the kernel's readahead), each of up to 16 chunks; read one
// after another, each chunk's disk wait, and on its first read its index
// lookup and BLAKE3 of 64 KiB, came before the next one's started, and
// the second core idled. The chunks go to disjoint parts of scratch and
// vecs, and the workers take them in file order, so the segment is still
// read nearly in order. The first error in file order is returned.
func (l *Live) fill(ino uint64, vecs [][]byte, reads []chunkRead, scratch []byte) error {
	one := func(r *chunkRead) error {
		data, err := l.stage.readRange(r.h, r.in, scratch[r.done:r.done+r.want])
		if err != nil {
			return fmt.Errorf("read inode %d chunk %d: %w", ino, r.idx, err)
		}
		vecs[r.slot] = data
		if len(data) < r.want {
			vecs[r.slot+1] = zeros[:r.want-len(data)]
		}
		return nil
	}
	workers := min(len(reads), fillWorkers)
	if workers <= 1 {
		for i := range reads {
			if err := one(&reads[i]); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, len(reads))
	var next atomic.Int64
	work := func() {
		for i := int(next.Add(1) - 1); i < len(reads); i = int(next.Add(1) - 1) {
			errs[i] = one(&reads[i])
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// readRange is Get for part of an object, read into dst by a store that
// can (cas.RangeReader): the staged and recent chunks first, as Get.
func (s *staging) readRange(h cas.Hash, off int, dst []byte) ([]byte, error) {
	r, ok := s.Store.(cas.RangeReader)
	if ok {
		s.mu.Lock()
		if b, held := s.blobs[h]; held {
			if b.data == nil && b.logged != nil {
				s.mu.Unlock()
				if err := b.logged.Wait(); err != nil { // see staging.get
					return nil, err
				}
				return r.ReadRange(h, off, dst)
			}
			if b.lent { // copied under s.mu, as Get does
				n := copy(dst, clip(b.data, off, len(dst)))
				s.mu.Unlock()
				return dst[:n], nil
			}
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

// Move is a part of a read that the store moves into a pipe itself
// (cas.Splicer, see ReadSplit): N bytes of object h from off on, which
// belong in slot Slot of ReadSplit's vecs (left empty there).
type Move struct {
	Slot int
	N    int
	sp   cas.Span // where the store found the object (resolved once)
	off  int
}

// ReadSplit is ReadVec for a reply that can be made in a pipe: the
// journaled chunks the store can splice (cas.Splicer: stored raw and
// verified by hash since it was opened) are not read but listed as
// moves, in slot order, and their slots in vecs are left empty; the rest
// is read as ReadVec reads it. vecs keeps its empty slots (a reply is
// vecs and moves, in slot order). Chunks in staging's memory are bytes,
// never moves: a staged chunk is not in the store yet.
func (l *Live) ReadSplit(ino uint64, off uint64, size int, scratch []byte) (vecs [][]byte, moves []Move, n int, err error) {
	vecs, reads, n, err := l.planRead(ino, off, size, scratch, false)
	if err != nil || len(reads) == 0 {
		return vecs, nil, n, err
	}
	if sp, ok := l.stage.Store.(cas.Splicer); ok {
		rest := reads[:0]
		moves = make([]Move, 0, len(reads))
		for _, r := range reads {
			span, ok := sp.Spliceable(r.h)
			if !ok || l.stage.inMemory(r.h) {
				rest = append(rest, r)
				continue
			}
			m := min(r.want, max(span.Len()-r.in, 0))
			if m > 0 {
				moves = append(moves, Move{Slot: r.slot, N: m, sp: span, off: r.in})
			}
			if m < r.want {
				vecs[r.slot+1] = zeros[:r.want-m]
			}
		}
		reads = rest
	}
	if len(reads) > 0 {
		if l.afterPlan != nil {
			l.afterPlan()
		}
		err = l.fill(ino, vecs, reads, scratch)
		if errors.Is(err, cas.ErrNotFound) {
			vecs, _, n, err = l.planRead(ino, off, size, scratch, true)
			moves = nil
		}
	}
	if err != nil {
		return nil, nil, 0, err
	}
	return vecs, moves, n, nil
}

// Splice moves m's bytes into the pipe whose write end is fd (see
// cas.Splicer.SpliceSpan: on an error the reply is to be read again with
// ReadVec).
func (l *Live) Splice(m Move, fd int) error {
	sp, ok := l.stage.Store.(cas.Splicer)
	if !ok {
		return errors.New("splice: the store cannot")
	}
	return sp.SpliceSpan(m.sp, m.off, m.N, fd)
}

// inMemory reports whether h is staged or among the recent chunks (read
// from memory by readRange, never by the store).
func (s *staging) inMemory(h cas.Hash) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, staged := s.blobs[h]
	_, recent := s.recent[h]
	return staged || recent
}
