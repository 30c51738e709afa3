package rewind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// beforeRead, if set, is called by a reader before it opens a file: tests
// change the directory there, between the walk's pin and the read.
var beforeRead func(rel string)

// read opens j's file from its pin, checks it is the inode the walk
// stat'ed, and reads its chunks and xattrs into j.
func (r *reader) read(j *fileJob) {
	defer close(j.done)
	defer unix.Close(j.pfd)
	if beforeRead != nil {
		beforeRead(j.rel)
	}
	if r.p.ctx.Err() != nil {
		j.err = fmt.Errorf("import %s: %w", j.rel, context.Cause(r.p.ctx))
		return
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", j.pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		j.err = fmt.Errorf("import %s: %w", j.rel, err)
		return
	}
	defer unix.Close(fd)
	fst, err := sameInode(fd, &j.st, j.rel)
	if err != nil {
		j.err = err
		return
	}
	if j.err = r.readChunks(fd, fst.Size, j); j.err != nil {
		return
	}
	j.xattrs = readXattrs(xattrAt{fd: fd})
}

// readChunks stores the file's chunks and lists them in j; all-zero
// chunks become holes. j.like, if set, is the base node whose stat the
// file matched: a slot that reads as like's keeps like's hash. A tree
// stores a chunk shorter than its slot (a write, then a grow: the rest
// reads as zeros) and may keep zeros as data, while a read stores the slot
// whole and zeros as a hole; without this a file nobody touched since base
// would differ from it by hash alone and be taken for a change underneath
// (DESIGN invariant 14). The size is what was read: the file may have
// changed since the walk stat'ed it. size is the file's size when opened:
// a file shorter than a chunk has no slot in a hole to skip (no SEEK_DATA),
// and a read that stops short at size is taken for the end (no second
// read to meet it).
func (r *reader) readChunks(fd int, size int64, j *fileJob) error {
	data := int64(-1) // where SEEK_DATA last found data
	if size < cas.ChunkSize {
		data = math.MaxInt64
	}
	for idx := uint64(0); ; idx++ {
		off := int64(idx * cas.ChunkSize)
		if data < off {
			data = dataAt(fd, off)
		}
		buf, err := r.space()
		if err != nil {
			return fmt.Errorf("import %s: %w", j.rel, err)
		}
		var n int
		var rerr error
		if data >= off+cas.ChunkSize && off+cas.ChunkSize <= size {
			// A whole slot in a hole reads as zeros: a sparse file's
			// gigabytes of holes are not read.
			n = copy(buf, zeroChunk[:])
		} else {
			n, rerr = preadFull(fd, buf, off, size)
		}
		if n > 0 {
			var h cas.Hash
			if lh, ok := r.sameSlot(j.like, idx, buf[:n]); ok {
				h = lh
			} else if !zero(buf[:n]) {
				if h, err = r.put(buf[:n]); err != nil {
					return fmt.Errorf("import %s: %w", j.rel, err)
				}
			}
			j.chunks = append(j.chunks, journal.Chunk{Index: idx, Hash: h})
			j.size += uint64(n)
		}
		if rerr == io.EOF || n == 0 {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("import %s: %w", j.rel, rerr)
		}
	}
}

// preadFull reads len(b) bytes at off, or up to the end of the file
// (io.EOF then), as os.File.ReadAt does; a short read that reaches size
// is the end.
func preadFull(fd int, b []byte, off, size int64) (int, error) {
	n := 0
	for n < len(b) {
		if n > 0 && off+int64(n) >= size {
			return n, io.EOF
		}
		m, err := unix.Pread(fd, b[n:], off+int64(n))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}

// dataAt returns the first offset at or after off that holds data
// (SEEK_DATA): MaxInt64 when none does, off when the file system cannot
// tell. It moves fd's offset, which pread does not use.
func dataAt(fd int, off int64) int64 {
	at, err := unix.Seek(fd, off, unix.SEEK_DATA)
	switch {
	case errors.Is(err, unix.ENXIO):
		return math.MaxInt64
	case err != nil:
		return off
	}
	return at
}

// sameSlot returns like's hash for chunk slot idx if b is what that slot
// reads as (false without like, or if the chunk cannot be read).
func (r *reader) sameSlot(like *tree.Node, idx uint64, b []byte) (cas.Hash, bool) {
	if like == nil {
		return cas.Hash{}, false
	}
	var h cas.Hash
	if hs := like.ChunkHashes(); idx < uint64(len(hs)) {
		h = hs[idx]
	}
	stored, err := chunkBytes(r.im.Store, h)
	return h, err == nil && sameSlotBytes(stored, b)
}

// zeroChunk is a slot of zeros, to compare with (bytes.Equal is
// vectorized; a byte loop over a sparse file's gigabytes is not).
var zeroChunk [cas.ChunkSize]byte

func zero(b []byte) bool {
	for len(b) > len(zeroChunk) {
		if !bytes.Equal(b[:len(zeroChunk)], zeroChunk[:]) {
			return false
		}
		b = b[len(zeroChunk):]
	}
	return bytes.Equal(b, zeroChunk[:len(b)])
}
