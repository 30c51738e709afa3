package cas

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The segment log (see doc.go, "Segment log"): append-only files in one
// directory, each a header and then frames, one frame per commit.
const (
	segMagic      = "reynfsSG"
	segFormat     = 2
	segHeaderSize = 64
	// SegmentSize is where the writer starts a new segment: a frame that
	// would take the active segment past it goes into a new one (a frame
	// bigger than this gets a segment of its own).
	SegmentSize = 128 << 20

	// A frame header (frame.go) of store format 6 carries the frame's
	// synced-through mark; format 5 and older wrote frameMagicV2 headers
	// without one, which are still read.
	frameMagic        = 0x52464d33 // "RFM3"
	frameHeaderSize   = 48
	frameMagicV2      = 0x52464d32 // "RFM2"
	frameHeaderV2Size = 32
	// maxFrame bounds a frame's payload; a header claiming more is damage.
	maxFrame = 1 << 31
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segmentSize is SegmentSize, a variable so that tests can roll segments
// without writing 128 MiB.
var segmentSize int64 = SegmentSize

// Pos is a position in the log: a segment number and a byte offset in it.
type Pos struct {
	Seg uint64
	Off int64
}

func (p Pos) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, p.Seg)
	return binary.BigEndian.AppendUint64(b, uint64(p.Off))
}

func decodePos(b []byte) (Pos, error) {
	if len(b) != 16 {
		return Pos{}, fmt.Errorf("%w: log position of %d bytes, want 16", ErrDamaged, len(b))
	}
	return Pos{binary.BigEndian.Uint64(b), int64(binary.BigEndian.Uint64(b[8:]))}, nil
}

// ErrDamaged: the log is damaged in a way a crash cannot explain (a bad
// frame before a good one, a missing segment, another store's segment).
var ErrDamaged = errors.New("store log damaged")

func segName(n uint64) string { return fmt.Sprintf("%016x.seg", n) }

// segHeader is the first segHeaderSize bytes of segment n of store id.
func segHeader(n uint64, id string) []byte {
	b := make([]byte, segHeaderSize)
	copy(b, segMagic)
	binary.BigEndian.PutUint32(b[8:], segFormat)
	binary.BigEndian.PutUint64(b[12:], n)
	b[20] = byte(copy(b[21:60], id))
	binary.BigEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
	return b
}

// checkSegHeader checks that b is the header of segment n of store id.
func checkSegHeader(b []byte, n uint64, id string) error {
	if len(b) < segHeaderSize || string(b[:8]) != segMagic ||
		crc32.Checksum(b[:60], castagnoli) != binary.BigEndian.Uint32(b[60:]) {
		return errors.New("bad segment header")
	}
	if f := binary.BigEndian.Uint32(b[8:]); f != segFormat {
		return fmt.Errorf("segment format %d, want %d", f, segFormat)
	}
	if got := binary.BigEndian.Uint64(b[12:]); got != n {
		return fmt.Errorf("header says segment %d", got)
	}
	l := int(b[20])
	if got := string(b[21 : 21+min(l, 39)]); got != id {
		return fmt.Errorf("segment of store %s, not %s", got, id)
	}
	return nil
}

// segLog is the directory of segments: one writer appends frames to the
// active segment, readers pread from kept-open files.
type segLog struct {
	dir      string
	dirf     *os.File
	id       string
	readOnly bool

	mu     sync.Mutex // the writer: append, roll
	active uint64     // segment number written now
	end    int64      // where the next frame starts (the file may be longer: prefill.go)

	// activeA and endA copy active and end for those that do not hold
	// mu: the prefill, and readers that must not read past the end.
	activeA atomic.Uint64
	endA    atomic.Int64
	fill    prefill

	// dirty is the segments written since the last sync, under dmu, not
	// mu: a sync starts while a commit still holds mu for its index write.
	// dirtyEnd is the end of the last frame written into them: what the
	// next sync makes durable.
	dmu      sync.Mutex
	dirty    map[uint64]*os.File
	dirtyEnd Pos

	// synced is how far the log is known durable: the dirtyEnd of the
	// last completed sync (or the end a reopen synced). Each frame's
	// header carries it (its synced-through mark; see recover.go), so
	// that a scan can tell a frame no sync ever covered from damage.
	smu    sync.Mutex
	synced Pos

	syncMu sync.Mutex    // one fdatasync round at a time
	syncs  atomic.Uint64 // syncs a caller waited for (the prefill runs while they grow)

	fault func(op string) error // crash tests: "frame", "prefill", "roll", "cut"

	rmu   sync.RWMutex
	files map[uint64]*os.File
}

// listSegments returns the segment numbers in dir, ascending.
func listSegments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ns []uint64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".seg") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(name, ".seg"), 16, 64)
		if err != nil || segName(n) != name {
			return nil, fmt.Errorf("%w: %s: not a segment name", ErrDamaged, filepath.Join(dir, name))
		}
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns, nil
}

// openSegLog opens the log directory (creating it and a first segment
// when create is set and it is missing).
func openSegLog(dir, id string, readOnly, create bool) (*segLog, error) {
	if create && !readOnly {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
	}
	dirf, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	l := &segLog{dir: dir, dirf: dirf, id: id, readOnly: readOnly,
		dirty: map[uint64]*os.File{}, files: map[uint64]*os.File{}}
	l.fill.kick = make(chan struct{}, 1)
	return l, nil
}

func (l *segLog) path(n uint64) string { return filepath.Join(l.dir, segName(n)) }

// file returns the open file of segment n, opening it on first use.
func (l *segLog) file(n uint64) (*os.File, error) {
	l.rmu.RLock()
	f := l.files[n]
	l.rmu.RUnlock()
	if f != nil {
		return f, nil
	}
	l.rmu.Lock()
	defer l.rmu.Unlock()
	if f := l.files[n]; f != nil {
		return f, nil
	}
	flags := os.O_RDWR
	if l.readOnly {
		flags = os.O_RDONLY
	}
	fd, err := unix.Openat(int(l.dirf.Fd()), segName(n), flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: l.path(n), Err: err}
	}
	f = os.NewFile(uintptr(fd), l.path(n))
	l.files[n] = f
	return f, nil
}

// create makes segment n (O_EXCL), writes its header and makes both the
// file and its directory entry durable.
func (l *segLog) create(n uint64) error {
	fd, err := unix.Openat(int(l.dirf.Fd()), segName(n),
		unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "create", Path: l.path(n), Err: err}
	}
	f := os.NewFile(uintptr(fd), l.path(n))
	if _, err := f.WriteAt(segHeader(n, l.id), 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("write segment header: %w", err)
	}
	if err := unix.Fdatasync(fd); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync segment %s: %w", l.path(n), err)
	}
	if err := l.dirf.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync log directory: %w", err)
	}
	l.rmu.Lock()
	l.files[n] = f
	l.rmu.Unlock()
	return nil
}

// resume makes segment n, whose frames end at end, the active one. What
// lies past end in the file is zeros (the scan checked): prefill a
// reopen may use.
func (l *segLog) resume(n uint64, end int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fill.mu.Lock()
	defer l.fill.mu.Unlock()
	l.setEnd(n, end)
	size := end
	f, err := l.file(n)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err != nil {
		return err
	} else if fi.Size() > end {
		size = fi.Size()
	}
	l.resetFill(size)
	if l.readOnly {
		return nil
	}
	// The frames a killed writer left unsynced are in the page cache:
	// sync them before the first mark claims them durable.
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("sync %s: %w", l.path(n), err)
	}
	l.dmu.Lock()
	l.dirtyEnd = Pos{n, end}
	l.dmu.Unlock()
	l.setSynced(Pos{n, end})
	return nil
}

// setSynced advances the synced-through mark to p (never back).
func (l *segLog) setSynced(p Pos) {
	l.smu.Lock()
	if posLess(l.synced, p) {
		l.synced = p
	}
	l.smu.Unlock()
}

// syncedThrough returns the synced-through mark.
func (l *segLog) syncedThrough() Pos {
	l.smu.Lock()
	defer l.smu.Unlock()
	return l.synced
}

// setEnd sets where the next frame goes. The caller holds mu.
func (l *segLog) setEnd(n uint64, end int64) {
	l.active, l.end = n, end
	l.activeA.Store(n)
	l.endA.Store(end)
}

// startSegment seals the active segment (its unused prefill dropped) and
// starts segment active+1. The caller holds mu.
func (l *segLog) startSegment() error {
	l.fill.mu.Lock()
	defer l.fill.mu.Unlock()
	// Truncate first: a crash after it leaves the old segment the last,
	// without a zero tail; a crash before the new segment's header is
	// durable leaves one the scan drops.
	if err := l.dropFill(); err != nil {
		return err
	}
	if err := l.create(l.active + 1); err != nil {
		return err
	}
	if l.fault != nil {
		if err := l.fault("roll"); err != nil {
			return fmt.Errorf("roll: injected fault: %w", err)
		}
	}
	if f, err := l.file(l.active); err == nil {
		l.markDirty(l.active, f, l.end) // the old one's last frames still need a sync
	}
	l.setEnd(l.active+1, segHeaderSize)
	l.resetFill(segHeaderSize)
	return nil
}

// append writes one encoded frame (header included) at the end of the
// active segment, rolling to a new segment first when the frame would
// take it past SegmentSize. On a failed or short write the segment is cut
// back to where the frame started. It returns where the frame starts.
// The caller holds l.mu.
func (l *segLog) append(frame frameVec) (Pos, error) {
	if l.readOnly {
		return Pos{}, errors.New("log opened read-only")
	}
	size := int64(frame.len())
	if l.end > segHeaderSize && l.end+size > segmentSize {
		if err := l.startSegment(); err != nil {
			return Pos{}, err
		}
	}
	f, err := l.file(l.active)
	if err != nil {
		return Pos{}, err
	}
	at := Pos{l.active, l.end}
	setFrameMark(frame, l.syncedThrough())
	locked := l.end+size > l.fill.filled.Load()
	if locked {
		// Past the pre-written space: the frame grows the file, which
		// the prefill must not do at the same time.
		l.fill.mu.Lock()
		defer l.fill.mu.Unlock()
	}
	if l.fault != nil && size > 1 {
		// Crash tests: half the frame is written when "frame" fires.
		if err := pwritev(f, frame.parts, l.end, size/2); err == nil {
			err = l.fault("frame")
			if err != nil {
				l.cutBack(f, locked)
				return Pos{}, fmt.Errorf("append: injected fault: %w", err)
			}
		}
	}
	if err := pwritev(f, frame.parts, l.end, size); err != nil {
		if terr := l.cutBack(f, locked); terr != nil {
			err = fmt.Errorf("%w (and cutting it back: %v)", err, terr)
		}
		return Pos{}, fmt.Errorf("append to %s at %d: %w", f.Name(), l.end, err)
	}
	l.setEnd(l.active, l.end+size)
	l.markDirty(l.active, f, l.end)
	l.wantFill()
	return at, nil
}

// cutBack removes a failed frame: the segment is truncated where it
// started (its prefill with it), so nothing but zeros follows the end.
// The caller holds mu, and fill.mu when locked says so.
func (l *segLog) cutBack(f *os.File, locked bool) error {
	if !locked {
		l.fill.mu.Lock()
		defer l.fill.mu.Unlock()
	}
	err := f.Truncate(l.end)
	l.resetFill(l.end)
	return err
}

// markDirty notes that segment n was written since the last sync, up to
// end: a sync that takes it (under dmu) makes the log durable to there.
func (l *segLog) markDirty(n uint64, f *os.File, end int64) {
	l.dmu.Lock()
	l.dirty[n] = f
	if p := (Pos{n, end}); posLess(l.dirtyEnd, p) {
		l.dirtyEnd = p
	}
	l.dmu.Unlock()
}

// iovMax is the most iovecs one pwritev takes (IOV_MAX on Linux).
const iovMax = 1024

// pwritev writes the first n bytes of parts at off, with as few system
// calls as the kernel allows (a short write continues where it stopped).
func pwritev(f *os.File, parts [][]byte, off, n int64) error {
	var vec [][]byte
	for _, p := range parts {
		if n <= 0 {
			break
		}
		p = p[:min(int64(len(p)), n)]
		n -= int64(len(p))
		if len(p) > 0 {
			vec = append(vec, p)
		}
	}
	fd := int(f.Fd())
	for len(vec) > 0 {
		k, err := unix.Pwritev(fd, vec[:min(len(vec), iovMax)], off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if k == 0 {
			return io.ErrShortWrite
		}
		off += int64(k)
		for k > 0 {
			if k < len(vec[0]) {
				vec[0] = vec[0][k:]
				break
			}
			k -= len(vec[0])
			vec = vec[1:]
		}
	}
	return nil
}

// sync fdatasyncs every segment written since the last sync: one device
// flush unless the writer rolled to a new segment meanwhile. A foreground
// sync (an fsync, a generation cut: someone waits for it, and will again)
// lets the prefill run a round; the index checkpoint's does not (see
// prefill.go).
func (l *segLog) sync(foreground bool) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.dmu.Lock()
	dirty, covered := l.dirty, l.dirtyEnd
	l.dirty = make(map[uint64]*os.File, 1)
	l.dmu.Unlock()
	for n, f := range dirty {
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return fmt.Errorf("sync %s: %w", l.path(n), err)
		}
	}
	// Everything up to covered was written before it was taken, into a
	// file just synced or synced before: frames written from now on say
	// so in their mark.
	l.setSynced(covered)
	if foreground {
		l.syncs.Add(1)
		// The prefill runs while the log is synced, when it has a step
		// to write: the usual fsync, with the space ahead less than a
		// step short, wakes no goroutine only to find nothing to do.
		if l.fillShort() {
			l.kickFill()
		}
	}
	return nil
}

// readAt reads n bytes of segment seg at off.
func (l *segLog) readAt(seg uint64, off int64, n int) ([]byte, error) {
	b := make([]byte, n)
	if err := l.readAtInto(seg, off, b); err != nil {
		return nil, err
	}
	return b, nil
}

// readAtInto is readAt into p (len(p) bytes), checked against the log's
// end as readAt is.
func (l *segLog) readAtInto(seg uint64, off int64, p []byte) error {
	n := len(p)
	if seg == l.activeA.Load() {
		// Pre-written zeros past the log's end are no object's bytes.
		// setEnd stores the segment before the end: an end read
		// after a roll is seen with the new segment, and skipped.
		end := l.endA.Load()
		if off+int64(n) > end && seg == l.activeA.Load() {
			return fmt.Errorf("read %s at %d: %d bytes past the log's end %d: %w", l.path(seg), off, n, end, ErrCorrupt)
		}
	}
	f, err := l.file(seg)
	if err != nil {
		return err
	}
	got, err := f.ReadAt(p, off)
	if got == n {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		// The index points past the end of the segment: the bytes are
		// gone, which for the object is damage like a wrong hash.
		err = fmt.Errorf("%d of %d bytes: %w", got, n, ErrCorrupt)
	}
	return fmt.Errorf("read %s at %d: %w", f.Name(), off, err)
}

func (l *segLog) close() error {
	first := l.stopFill()
	l.rmu.Lock()
	defer l.rmu.Unlock()
	for n, f := range l.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
		delete(l.files, n)
	}
	if err := l.dirf.Close(); err != nil && first == nil {
		first = err
	}
	return first
}
