package journal

// The end of Badger's mapped logs, measured and kept allocated ahead
// (space.go says why: a write into a mapped page without a block is a
// SIGBUS on a full disk).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// mapped is one of Badger's logs that space keeps allocated ahead of the
// writes.
type mapped struct {
	name  string
	id    int64
	f     *os.File
	est   int64 // where Badger's writing ends, at most (estimated)
	alloc int64 // [0, alloc) has blocks (we allocated them)
	since int   // commits since est was measured
	// known is where Badger's writing ended at the last measurement:
	// Badger only appends, so [0, known) stays written and a rescan
	// starts here (remeasure).
	known int64
	guard int64 // walGuard or vlogGuard: see remeasure
	full  int   // commits since the last full measurement
}

// active returns the log Badger writes now for slot i (0 value log, 1 WAL),
// noticing when Badger has moved on to a new file (the next number
// exists). nil if there is none (Badger keeps no WAL in memory mode).
func (s *space) active(i int, ext, format string) (*mapped, error) {
	m := s.logs[i]
	if m != nil && !s.check {
		return m, nil
	}
	if m != nil {
		if _, err := os.Stat(filepath.Join(s.dir, fmt.Sprintf(format, m.id+1))); err != nil {
			return m, nil // still the newest
		}
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("prepare store files: %w", err)
	}
	name, id := newest(ents, ext)
	if name == "" {
		return nil, nil
	}
	if m != nil {
		_ = m.f.Close() // Badger is done with it
		s.logs[i] = nil
	}
	f, err := os.OpenFile(filepath.Join(s.dir, name), os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("prepare %s: %w", name, err)
	}
	m = &mapped{name: name, id: id, f: f, guard: vlogGuard}
	if ext == ".mem" {
		m.guard = walGuard
	}
	if err := m.measure(); err != nil {
		_ = f.Close()
		return nil, err
	}
	m.alloc = m.est // what lies past it may be sparse: allocate it ourselves
	s.logs[i] = m
	return m, nil
}

// measure sets est to where Badger's writing really ends.
func (m *mapped) measure() error {
	var st unix.Stat_t
	if err := unix.Fstat(int(m.f.Fd()), &st); err != nil {
		return fmt.Errorf("prepare %s: %w", m.name, err)
	}
	end, err := writtenEnd(m.f, max(st.Blocks*512, m.alloc))
	if err != nil {
		return fmt.Errorf("prepare %s: %w", m.name, err)
	}
	m.est, m.known, m.since, m.full = end, end, 0, 0
	return nil
}

// fullEvery bounds the commits between two full measurements of a log
// (measure): the rescans between them cannot see data past a zero run
// longer than their guard, a full measurement can.
const fullEvery = 1024

// A rescan (remeasure) takes Badger's data to end before the first
// page-aligned run of zeros at least guard long. guard must be longer than
// any run of zero bytes inside what Badger appends between two
// measurements, or the rescan misses the data after it until the full
// measurement before the next allocation. In the WAL no value reaches the
// value threshold (1 KiB; larger ones go to the value log) and keys are
// short and NUL-free (hashes, seqs, paths), each entry with a header and a
// checksum, so walGuard is far more than a zero run there can be; a value
// in the value log may be anything, so vlogGuard is a quarter of the slack.
const (
	walGuard  = 16 << 10
	vlogGuard = prepSlack / 4
)

// remeasure sets est to where Badger's writing ends, scanning forward from
// known, where it ended at the last measurement, instead of backward from
// the allocated end through the slack: it reads what Badger appended since
// and guard bytes of zeros after it, not up to prepSlack. Reaching the
// allocated end, it finds exactly what measure finds. The fsync-per-write
// profile of main spent 0.2 s of 8.6 s in measure's backward scans (one
// every 64 commits or so, 256-512 KiB each).
func (m *mapped) remeasure() error {
	end, err := scanForward(m.f, m.known, m.alloc, m.guard)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", m.name, err)
	}
	m.est, m.known, m.since = end, end, 0
	return nil
}

// ahead makes sure that the n bytes after the end of what Badger has
// written are allocated, plus prepSlack. The end is estimated from what
// the committer handed Badger (generously: see shares); it is measured
// again every 64 commits, when check finds a page past the estimate no
// longer zero (someone else wrote to the store: cas.Put, the generation
// index) and when the estimate comes within prepSlack/2 of the allocated
// end: by a forward rescan from the last measurement (remeasure), or in
// full (backward from the allocated end, as on open) every fullEvery
// commits. Only when the measured end is within prepSlack/2 of the
// allocated end too does it allocate, after measuring in full.
func (m *mapped) ahead(n int64, check bool) error {
	rescanned := false
	if m.since >= 64 || check && m.tripped() {
		measure := m.remeasure
		if m.full >= fullEvery {
			measure = m.measure
		}
		if err := measure(); err != nil {
			return err
		}
		rescanned = true
	}
	m.since++
	m.full++
	if m.est+n+prepSlack/2 > m.alloc && !rescanned {
		if err := m.remeasure(); err != nil {
			return err
		}
	}
	if m.est+n+prepSlack/2 > m.alloc {
		if err := m.measure(); err != nil {
			return err
		}
		want := m.est + n + prepSlack
		if err := unix.Fallocate(int(m.f.Fd()), unix.FALLOC_FL_KEEP_SIZE, m.est, want-m.est); err != nil {
			if err == unix.ENOSPC || err == unix.EDQUOT {
				return fmt.Errorf("prepare %s: %w", m.name, ErrNoSpace)
			}
			if err != unix.EOPNOTSUPP { // without fallocate, statfs alone guards
				return fmt.Errorf("prepare %s: fallocate: %w", m.name, err)
			}
		}
		m.alloc = max(m.alloc, want)
	}
	m.est += n
	return nil
}

// tripped reports whether the page after the one holding est has data:
// then Badger wrote more than the committer handed it.
func (m *mapped) tripped() bool {
	const page = 4 << 10
	off := (m.est/page + 1) * page
	if off+page > m.alloc {
		return false
	}
	var buf [page]byte
	k, _ := m.f.ReadAt(buf[:], off)
	return lastNonZero(buf[:k]) >= 0
}

// writtenEnd returns the offset just past the last non-zero byte of f
// below alloc. Badger appends to its logs from the start, and what we
// allocated ahead of it reads as zeros, so this is where its writing
// stopped (give or take trailing zero bytes of the last entry, which the
// slack covers).
func writtenEnd(f *os.File, alloc int64) (int64, error) {
	const step = 64 << 10
	buf := make([]byte, step)
	for hi := alloc; hi > 0; {
		lo := max(hi-step, 0)
		k, err := f.ReadAt(buf[:hi-lo], lo)
		if err != nil && k < int(hi-lo) {
			// Past the file's size (allocated with KEEP_SIZE): zeros.
			clear(buf[k : hi-lo])
		}
		if i := lastNonZero(buf[:hi-lo]); i >= 0 {
			return lo + int64(i) + 1, nil
		}
		hi = lo
	}
	return 0, nil
}

// scanForward returns the offset just past the data of f that starts
// below from, scanning forward from there up to alloc: the data ends
// before the first page-aligned run of guard bytes of zeros, or at the
// last non-zero byte below alloc (as writtenEnd finds it) if no such run
// comes first. The bytes before from are taken as written.
func scanForward(f *os.File, from, alloc, guard int64) (int64, error) {
	const page = 4 << 10
	buf := make([]byte, 64<<10)
	end := from
	zeros := int64(-1) // where the current run of zero pages starts
	for off := from &^ (page - 1); off < alloc; {
		n := min(int64(len(buf)), alloc-off)
		k, err := f.ReadAt(buf[:n], off)
		if err != nil && k < int(n) {
			if !errors.Is(err, io.EOF) {
				return 0, err
			}
			// Past the file's size (allocated with KEEP_SIZE): zeros.
			clear(buf[k:n])
		}
		for p := int64(0); p < n; p += page {
			pg := buf[p:min(p+page, n)]
			if i := lastNonZero(pg); i >= 0 {
				end, zeros = max(end, off+p+int64(i)+1), -1
				continue
			}
			if zeros < 0 {
				zeros = off + p
			}
			if off+p+int64(len(pg))-zeros >= guard {
				return end, nil
			}
		}
		off += n
	}
	return end, nil
}

func lastNonZero(b []byte) int {
	var zero [512]byte
	for len(b) > 0 {
		k := min(len(b), len(zero))
		tail := b[len(b)-k:]
		if !bytes.Equal(tail, zero[:k]) {
			for i := k - 1; i >= 0; i-- {
				if tail[i] != 0 {
					return len(b) - k + i
				}
			}
		}
		b = b[:len(b)-k]
	}
	return -1
}
