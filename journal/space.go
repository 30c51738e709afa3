package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A full disk is ENOSPC for writers, never a crash (issue 8 item 11,
// DESIGN invariant 13).
//
// Badger writes its value log (*.vlog) and its memtable write-ahead log
// (*.mem) by copying into shared memory mappings of sparse files: Badger
// ftruncates a new value log to twice ValueLogFileSize and a new WAL to
// twice MemTableSize, and only the pages it touches get blocks. A store
// on a full file system turns the first store into such a page into
// SIGBUS, which no Go code can catch, and the daemon dies. So:
//
//  1. Before each commit the committer makes sure the part of the active
//     .vlog and .mem that the batch can reach has blocks: it finds where
//     Badger's writing stopped (the last non-zero byte, scanning back from
//     the end of what is allocated) and fallocates (KEEP_SIZE) from there
//     the batch's share plus prepSlack. If that fails, the batch is refused
//     with ErrNoSpace before Badger sees any of it. The fixed-size DISCARD
//     file Badger also maps is allocated whole.
//  2. Free space must then still hold the batch once more, for a .vlog or
//     .mem Badger starts in the middle of it (a new file is sparse again).
//  3. Ordinary writes ask Admit first, before anything changes in the
//     tree: it refuses (ErrNoSpace, which the file system answers ENOSPC)
//     while the free space is below twice what is queued and asked for,
//     plus a reserve. The reserve is left for work that must finish on a
//     full disk: generation cuts, rewinds and the final flush and
//     generation of an unmount (which do not call Admit), and Badger's own
//     table writes (memtable flushes and compactions, also written through
//     mappings, of files Badger creates and fills at once, so nothing can
//     preallocate them). Removals and in-place metadata changes
//     (AdmitShrink) may use half of it, so a user can still delete files
//     on a full disk.
//
// Admit asks statfs every time, so writes resume as soon as space comes
// back; refusing a write never fails the journal. Only a commit that
// cannot be backed at all (step 1 or 2 failing, which the reserve makes
// unlikely) fails the journal as any other commit error does.

// Admission classes for Admit: how much of the reserve a write may use.
const (
	// AdmitWrite: creates or grows something; keeps the whole reserve.
	AdmitWrite = iota
	// AdmitShrink: removes something or changes metadata in place; may
	// use half the reserve.
	AdmitShrink
)

const (
	// prepSlack is how far past a batch's share the committer keeps the
	// active files allocated: small writes Badger takes outside the
	// committer (cas.Put, the generation index) land in it.
	prepSlack = 512 << 10
	// entryOverhead bounds what Badger adds to one key and value in a log
	// (header, CRC, the key's version suffix).
	entryOverhead = 48
	// vptrSize is what a value stored in the value log costs in the WAL.
	vptrSize = 12
)

// reserveFor returns the free space ordinary writes leave on a file system
// of total bytes: an eighth of it, at least 2 MiB and at most 64 MiB (two
// memtables' worth of table writes).
func reserveFor(total uint64) uint64 {
	return min(max(total/8, 2<<20), 64<<20)
}

// Usable returns how much of avail, the bytes free on a file system of
// total bytes, ordinary writes may still use: all but the reserve and the
// slack Admit keeps for an AdmitWrite (never less than zero). statfs in
// the mount reports it, so df shows 0 when writers get ENOSPC instead of
// the reserve that only cuts, rewinds and unmounts may use. Each write
// needs twice its size of it (Admit).
func Usable(avail, total uint64) uint64 {
	keep := keepFree(total, AdmitWrite)
	if avail <= keep {
		return 0
	}
	return avail - keep
}

// keepFree is the free space Admit leaves to others on a file system of
// total bytes: the reserve (half of it for AdmitShrink) and room for the
// committer's slack.
func keepFree(total uint64, class int) uint64 {
	reserve := reserveFor(total)
	if class == AdmitShrink {
		reserve /= 2
	}
	return reserve + 2*prepSlack
}

// space keeps Badger's mapped files backed by blocks and answers Admit.
type space struct {
	dir       string
	threshold int // Badger's value threshold: larger values go to the vlog
	// freeFn returns the bytes available to this process on the store's
	// file system and that file system's size. Tests replace it.
	freeFn atomic.Pointer[freeFunc]

	mu      sync.Mutex
	logs    [2]*mapped // the value log and the WAL Badger writes now
	whole   bool       // DISCARD (fixed size) allocated whole
	commits int        // prepared so far
	check   bool       // this commit also looks for what others did

	full atomic.Bool // last Admit refused; logged on change

	// prefilled returns the bytes of the segment log's pre-written space
	// past its end (cas/prefill.go): free space for the log, which statfs
	// counts as taken. nil without a log.
	prefilled func() int64

	// Admit's last statfs answer, reused for admitReuse while far from
	// the reserve (see admitFree).
	seenMu    sync.Mutex
	seenAt    time.Time
	seenFn    *freeFunc
	seenAvail uint64
	seenTotal uint64
	seenSpent uint64 // what Admit let through since
}

// An Admit may reuse the last statfs answer for admitReuse, less what it
// admitted since, while that leaves more than admitSlack above what it
// wants: admitSlack is more than any reserve (keepFree), so a reused
// answer only ever admits, and an Admit near the reserve always asks
// statfs. statfs was 5% of the daemon's CPU in tar x and git add, one
// call per write(2); a few milliseconds of reuse with 128 MiB of slack
// cannot let writes into the reserve unless another process fills the
// disk by that much within them, and the committer's own check before
// each frame still stands then.
const (
	admitReuse = 5 * time.Millisecond
	admitSlack = 128 << 20
)

// admitFree returns the free space for an Admit that wants want bytes
// (before the reserve).
func (s *space) admitFree(want uint64) (avail, total uint64, err error) {
	fn := s.freeFn.Load()
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	if s.seenFn == fn && time.Since(s.seenAt) < admitReuse && s.seenAvail >= s.seenSpent+want+admitSlack {
		avail = s.seenAvail - s.seenSpent
		s.seenSpent += want
		return avail, s.seenTotal, nil
	}
	avail, total, err = (*fn)()
	if err != nil {
		s.seenFn = nil
		return 0, 0, err
	}
	s.seenFn, s.seenAt, s.seenAvail, s.seenTotal, s.seenSpent = fn, time.Now(), avail, total, want
	return avail, total, nil
}

type freeFunc func() (avail, total uint64, err error)

func newSpace(dir string, threshold int) *space {
	s := &space{dir: dir, threshold: threshold}
	statfs := freeFunc(func() (uint64, uint64, error) {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
		}
		return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
	})
	s.freeFn.Store(&statfs)
	return s
}

func (s *space) free() (avail, total uint64, err error) { return (*s.freeFn.Load())() }

// Admit reports whether an ordinary write that will journal about n bytes
// (records and the data they carry) may go ahead: the caller asks before
// it changes anything, and answers ENOSPC when the error wraps ErrNoSpace.
// class is AdmitWrite or AdmitShrink. Generation cuts, rewinds and an
// unmount's final flush do not ask: they may use the reserve.
func (j *Journal) Admit(n int, class int) error {
	if j.space == nil {
		return nil
	}
	j.mu.Lock()
	queued := j.cur.bytes + j.inflight
	j.mu.Unlock()
	want := 2 * uint64(queued+max(n, 0))
	avail, total, err := j.space.admitFree(want)
	if err != nil {
		j.log.Warn().Err(err).Msg("free space unknown; write admitted")
		return nil
	}
	avail += j.space.prefill()
	keep := keepFree(total, class)
	need := want + keep
	if avail < need {
		if !j.space.full.Swap(true) {
			j.log.Warn().Uint64("free", avail).Uint64("reserve", keep).
				Msg("store file system full: writes get ENOSPC until space is freed")
		}
		return fmt.Errorf("append: %w (%d bytes free, %d needed with the reserve)", ErrNoSpace, avail, need)
	}
	if class == AdmitWrite && j.space.full.Swap(false) {
		j.log.Info().Uint64("free", avail).Msg("store file system has space again: writes resume")
	}
	return nil
}

// shares returns how many bytes b can append to the value log and to the
// memtable WAL, and to the segment log (written with pwrite, so it needs
// no preallocation, only room on the file system).
func (s *space) shares(b *batch) (vlog, wal, seg int) {
	add := func(key, val int) {
		if val >= s.threshold {
			vlog += key + val + entryOverhead
			wal += key + vptrSize + entryOverhead
		} else {
			wal += key + val + entryOverhead
		}
	}
	for _, it := range b.items {
		for _, bl := range it.blobs {
			add(1+len(bl.Hash), locLen+len(bl.Base)+2) // its index entry (a delta's, at most)
			seg += len(bl.Hash) + len(bl.Data) + 16
		}
		n := 2 // a reset is indexed twice
		if !it.reset {
			n = 1
		}
		for range n {
			add(max(len(it.key), 9), len(it.val))
			seg += max(len(it.key), 9) + len(it.val) + 8
		}
	}
	return vlog, wal + 4096, seg + 64 // "m/seq", the log position, Badger's transaction marks
}

// prefill returns the segment log's pre-written bytes past its end.
func (s *space) prefill() uint64 {
	if s.prefilled == nil {
		return 0
	}
	return uint64(max(s.prefilled(), 0))
}

// prefillHeadroom is what the segment log's prefill leaves free beyond
// what Admit keeps: on a nearly full disk it stops, and commits append.
const prefillHeadroom = 64 << 20

// prefillRoom reports whether the segment log may pre-write n more bytes
// (cas.Badger.SetPrefillRoom): only while the free space stays above the
// reserve and Admit's slack by prefillHeadroom, so pre-written space
// never takes what cuts, rewinds and unmounts need, and a full disk
// fails no commit for its sake (a commit past it appends, as before).
func (s *space) prefillRoom(n int64) bool {
	avail, total, err := s.free()
	if err != nil {
		return false
	}
	return avail >= uint64(max(n, 0))+keepFree(total, AdmitWrite)+prefillHeadroom
}

// locLen is the size of an object's index entry (cas.Loc).
const locLen = 25

// prepare backs what b can write in Badger's mapped files with blocks
// (steps 1 and 2 above). Errors wrap ErrNoSpace or are I/O errors.
func (s *space) prepare(b *batch) error {
	vlog, wal, seg := s.shares(b)
	return s.prepareBytes(vlog, wal, seg, false)
}

// prepareBytes is prepare for vlog bytes of value log and wal bytes of
// WAL, and seg bytes of segment log (counted in the free-space check
// only); force makes it look for what others did whatever the count.
func (s *space) prepareBytes(vlog, wal, seg int, force bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The system calls that only notice what others did (a new log file,
	// writes outside the committer, space taken on the file system) run
	// for every 8th commit and every big one: a small commit between
	// checks is covered by the slack and the reserve.
	s.commits++
	s.check = force || s.commits%8 == 0 || vlog+wal+seg >= 256<<10
	for i, w := range []struct {
		ext, format string
		bytes       int
	}{{".vlog", "%06d.vlog", vlog}, {".mem", "%05d.mem", wal}} {
		m, err := s.active(i, w.ext, w.format)
		if err != nil {
			return err
		}
		if m != nil {
			if err := m.ahead(int64(w.bytes), s.check); err != nil {
				return err
			}
		}
	}
	if !s.whole {
		path := filepath.Join(s.dir, "DISCARD")
		if err := allocWhole(path); err != nil {
			return err
		}
		_, err := os.Stat(path)
		s.whole = err == nil
	}
	if !s.check {
		return nil
	}
	seg = max(seg-int(s.prefill()), 0) // lands in pre-written space
	avail, _, err := s.free()
	if err == nil && avail < uint64(vlog+wal+seg) {
		return fmt.Errorf("prepare store files: %w (%d bytes free, a batch of %d)", ErrNoSpace, avail, vlog+wal+seg)
	}
	return nil
}

// allocWhole gives every byte of a fixed-size mapped file a block.
func allocWhole(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil // not made yet: the next commit looks again
	}
	if err != nil {
		return fmt.Errorf("prepare %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("prepare %s: %w", filepath.Base(path), err)
	}
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, fi.Size())
	switch {
	case err == nil || err == unix.EOPNOTSUPP:
		return nil
	case err == unix.ENOSPC || err == unix.EDQUOT:
		return fmt.Errorf("prepare %s: %w", filepath.Base(path), ErrNoSpace)
	}
	return fmt.Errorf("prepare %s: fallocate: %w", filepath.Base(path), err)
}

// newest returns the name and number of the highest-numbered file with
// suffix ext ("" if none): the one Badger writes to.
func newest(ents []os.DirEntry, ext string) (string, int64) {
	best, bestID := "", int64(-1)
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ext) {
			continue
		}
		id, err := strconv.ParseInt(strings.TrimSuffix(name, ext), 10, 64)
		if err == nil && id > bestID {
			best, bestID = name, id
		}
	}
	return best, bestID
}

// close releases the files space keeps open.
func (s *space) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range s.logs {
		if m != nil {
			_ = m.f.Close()
			s.logs[i] = nil
		}
	}
}

// Prepare backs the next n bytes Badger may write to its value log (and
// what that costs in its WAL) with blocks, for a caller about to write to
// the database outside Enqueue: a value-log GC run rewrites live values
// into the active log. An error wrapping ErrNoSpace means there is no
// room: skip the write.
func (j *Journal) Prepare(n int) error {
	if j.space == nil {
		return nil
	}
	return j.space.prepareBytes(n, n/8+4096, 0, true)
}

// SetFreeSpace replaces how the journal learns the free space of the
// store's file system (statfs by default): tests make a disk full without
// filling one. f returns the bytes available and the file system's size.
func (j *Journal) SetFreeSpace(f func() (avail, total uint64, err error)) {
	if j.space != nil {
		ff := freeFunc(f)
		j.space.freeFn.Store(&ff)
	}
}
