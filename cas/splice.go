package cas

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Splicing: the bytes of an object go from its segment file to a pipe
// with splice(2), and from the pipe to the FUSE device (fs/), so that a
// read of a chunk served before costs one copy in the kernel, as the
// go-fuse loopback's reads do, instead of a pread into the daemon's
// memory, a CRC of it and a writev to the device (two copies, and the
// CRC): fio's warm sequential read spent its daemon CPU on those.
//
// Only an object stored raw (neither compressed nor a delta) whose
// bytes were verified by hash when it was first read from disk since
// the store was opened (its location is in locCache, as get leaves it)
// is spliced: damage already on disk is still found by that first read,
// and is ErrCorrupt (EIO) as before. Damage to a segment after that
// first read is not seen by a splice, which never has the bytes in user
// space: the same risk as the loopback's (and ext4's without data
// checksums), and `reynfs fsck` still re-hashes every object. ReadRange
// keeps checking its remembered CRCs.
//
// A reply resolves each object once (Spliceable: the remembered location
// and the segment's open file, as a Span) and splices from that Span: a
// READ of 512 KiB is 8 chunks, and looking each one up again for the
// splice cost a second locCache and segment-file lookup per chunk.
//
// Safety against the compactor: a segment it retires stays open for
// retireDelay and is then closed. A splice runs inside the file's
// SyscallConn().Control, which holds the descriptor for the call, so a
// close racing it cannot hand the number to another file: the splice
// then fails and the caller reads the object the ordinary way (which
// looks it up again). A segment is immutable below its end and its
// number is never reused, and the bytes moved into the pipe are page
// references taken during the call, so nothing the compactor does later
// changes what the pipe holds. A Span resolved just before the compactor
// moved its object splices the old copy's identical bytes while the old
// segment is open, and fails once it is closed.

// Splicer is a Store that can move a verified object's bytes from its
// segment file into a pipe without copying them through user space.
type Splicer interface {
	// Spliceable reports whether object h may be spliced, and where its
	// bytes are (Span.Len is its length). A reply resolves each object
	// once, here, and splices from the Span it got.
	Spliceable(h Hash) (Span, bool)
	// SpliceSpan moves n bytes of the object at s from off on into the
	// pipe whose write end is fd (opened blocking or not: the call never
	// waits for room in the pipe; the caller gives it enough). On an
	// error the pipe may hold part of the range: the caller drops what
	// the pipe holds and reads the object the ordinary way.
	SpliceSpan(s Span, off, n int, fd int) error
}

// Span is where Spliceable found a verified raw object: its segment's
// open file and the object's first byte and length there. It stays
// usable as long as the file is open: a segment is immutable below its
// end and its number never reused, and once the compactor has retired
// and closed it a splice from it fails (the caller then reads the object
// the ordinary way, which looks it up again).
type Span struct {
	f   *os.File
	pos int64
	n   int
}

// Len is the object's length.
func (s Span) Len() int { return s.n }

var _ Splicer = (*Badger)(nil)

// errNoSplice is SpliceSpan's error for an object it cannot move.
var errNoSplice = errors.New("not a verified raw object in the log")

// Spliceable implements Splicer.
func (b *Badger) Spliceable(h Hash) (Span, bool) {
	if b.log == nil {
		return Span{}, false
	}
	e, ok := b.locs.get(h)
	if !ok || !raw(e.loc) {
		return Span{}, false
	}
	f, err := b.log.file(e.loc.Seg)
	if err != nil {
		return Span{}, false // the ordinary read reports it
	}
	return Span{f: f, pos: e.loc.Off, n: int(e.loc.Raw)}, true
}

// SpliceSpan implements Splicer.
func (b *Badger) SpliceSpan(s Span, off, n int, fd int) error {
	if s.f == nil || off < 0 || n < 0 || off+n > s.n {
		return errNoSplice
	}
	rc, err := s.f.SyscallConn()
	if err != nil {
		return err
	}
	pos := s.pos + int64(off)
	var serr error
	cerr := rc.Control(func(seg uintptr) {
		for n > 0 {
			// SPLICE_F_NONBLOCK: a full pipe is an error (EAGAIN), not
			// a wait that would hold the FUSE request forever.
			k, err := unix.Splice(int(seg), &pos, fd, nil, n, unix.SPLICE_F_NONBLOCK)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				serr = err
				return
			}
			if k <= 0 {
				serr = io.ErrUnexpectedEOF // the segment is shorter: the caller's read will tell
				return
			}
			n -= int(k)
		}
	})
	if cerr == nil {
		cerr = serr
	}
	if cerr != nil {
		return fmt.Errorf("splice from %s at %d: %w", s.f.Name(), pos, cerr)
	}
	return nil
}
