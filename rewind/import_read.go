package rewind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// beforeRead, if set, is called by a reader before it opens a file: tests
// change the directory there, between the walk's pin and the read.
var beforeRead func(rel string)

// reopen opens the file an O_PATH pin holds for reading, through its
// magic link in /proc/self/fd: from the pipeline's descriptor of that
// directory when it has one, which spares the lookup of /proc/self for
// every file (about 2.5 of the 8 µs an open took).
func (p *pipeline) reopen(pfd int) (int, error) {
	const flags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
	if p.procFd >= 0 {
		return unix.Openat(p.procFd, strconv.Itoa(pfd), flags, 0)
	}
	return unix.Open(fmt.Sprintf("/proc/self/fd/%d", pfd), flags, 0)
}

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
	fd, err := r.p.reopen(j.pfd)
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

// uringBatch is how many queued jobs a reader takes at once to read with
// one submission (import_uring.go).
const uringBatch = 64

// opened is a job of a batch whose file the reader has opened.
type opened struct {
	j    *fileJob
	fd   int
	size int64
	slot []byte // small files: where the ring reads the file, in buf
}

// readBatch reads jobs: each file is opened and checked as read does,
// then the small ones (under a chunk, no base to compare with) are read
// with one io_uring submission into slots of the buffer, and the others,
// and any whose read came back short or failed, as read reads them. Every
// job is done (its done closed) when readBatch returns, also on a panic.
func (r *reader) readBatch(jobs []*fileJob) {
	var open []opened
	defer func() {
		for _, o := range open {
			if o.fd >= 0 {
				unix.Close(o.fd)
			}
		}
		for _, j := range jobs {
			if j.pfd >= 0 {
				unix.Close(j.pfd)
			}
			select {
			case <-j.done:
			default: // a panic stopped the batch, and the pipeline
				j.err = fmt.Errorf("import %s: %w", j.rel, context.Cause(r.p.ctx))
				close(j.done)
			}
		}
	}()
	defer r.p.recovered()
	for _, j := range jobs {
		if fd, size, ok := r.open(j); ok {
			open = append(open, opened{j: j, fd: fd, size: size})
		}
	}
	for len(open) > 0 {
		n := r.slots(open)
		if n == 0 {
			if err := r.flush(); err != nil {
				for _, o := range open {
					o.j.err = fmt.Errorf("import %s: %w", o.j.rel, err)
				}
				return
			}
			n = r.slots(open)
		}
		r.readSlots(open[:n])
		// The slots' chunks join the batch before any other file of
		// the round is read: that read may store the batch and reuse
		// the buffer.
		for i := range open[:n] {
			r.keepSlot(&open[i])
		}
		for i := range open[:n] {
			r.finishJob(&open[i])
		}
		open = open[n:]
	}
}

// open opens j's file from its pin and checks it is the inode the walk
// stat'ed; false (with j.err set and j done) if not.
func (r *reader) open(j *fileJob) (int, int64, bool) {
	if beforeRead != nil {
		beforeRead(j.rel)
	}
	fail := func(err error) (int, int64, bool) {
		j.err = err
		unix.Close(j.pfd)
		j.pfd = -1
		close(j.done)
		return -1, 0, false
	}
	if r.p.ctx.Err() != nil {
		return fail(fmt.Errorf("import %s: %w", j.rel, context.Cause(r.p.ctx)))
	}
	fd, err := r.p.reopen(j.pfd)
	if err != nil {
		return fail(fmt.Errorf("import %s: %w", j.rel, err))
	}
	fst, err := sameInode(fd, &j.st, j.rel)
	if err != nil {
		unix.Close(fd)
		return fail(err)
	}
	return fd, fst.Size, true
}

// slots gives the leading jobs of open that the ring reads a slot of the
// buffer each (size+1 bytes: a read that fills it found the file grown)
// and returns how many jobs it went through; 0 when the first small file
// needs a slot the buffer has no room for.
func (r *reader) slots(open []opened) int {
	for i := range open {
		o := &open[i]
		if r.ring == nil || o.j.like != nil || o.size >= cas.ChunkSize || i == r.ring.entries {
			return max(i, 1)
		}
		need := int(o.size) + 1
		if len(r.buf)-r.used < need {
			return i
		}
		o.slot = r.buf[r.used : r.used+need]
		r.used += need
	}
	return len(open)
}

// readSlots reads the slots of open with one submission. A file whose
// read fails or comes back short keeps no slot: finishJob reads it again.
func (r *reader) readSlots(open []opened) {
	var fds []int
	var bufs [][]byte
	for _, o := range open {
		if o.slot != nil {
			fds, bufs = append(fds, o.fd), append(bufs, o.slot)
		}
	}
	if len(fds) == 0 {
		return
	}
	res := make([]int32, len(fds))
	if err := r.ring.read(fds, bufs, res); err != nil {
		r.ring.close() // errUringUnusable: pread from now on
		r.ring = nil
		for i := range open {
			open[i].slot = nil
		}
		return
	}
	k := 0
	for i := range open {
		o := &open[i]
		if o.slot == nil {
			continue
		}
		n := int(res[k])
		k++
		if n < int(o.size) && n >= 0 {
			// Short: read on from where it stopped, as preadFull does.
			m, err := preadFull(o.fd, o.slot[n:], int64(n), o.size)
			if err != nil && err != io.EOF {
				n = -1
			} else {
				n += m
			}
		}
		if n < 0 || n == len(o.slot) {
			o.slot = nil // failed, or grown: read as read reads it
			continue
		}
		o.slot = o.slot[:n]
	}
}

// keepSlot adds the chunk the ring read into o's slot to the batch (an
// all-zero one is a hole, as readChunks makes it).
func (r *reader) keepSlot(o *opened) {
	if len(o.slot) == 0 {
		return // nil: finishJob reads it; empty: an empty file
	}
	var h cas.Hash
	if !zero(o.slot) {
		h = cas.Sum(o.slot)
		r.blobs = append(r.blobs, cas.Blob{Hash: h, Data: o.slot})
	}
	o.j.chunks = append(o.j.chunks, journal.Chunk{Index: 0, Hash: h})
	o.j.size = uint64(len(o.slot))
}

// finishJob reads the file of a job the ring did not read as read does,
// then reads its xattrs and marks it done.
func (r *reader) finishJob(o *opened) {
	j := o.j
	if o.slot == nil {
		j.err = r.readChunks(o.fd, o.size, j)
	}
	if j.err == nil {
		j.xattrs = readXattrs(xattrAt{fd: o.fd})
	}
	unix.Close(o.fd)
	o.fd = -1
	unix.Close(j.pfd)
	j.pfd = -1
	close(j.done)
}
