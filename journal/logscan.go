package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Badger's log entry layout (badger v4 memtable.go encodeEntry, value.go
// safeRead.Entry): a header of meta and user-meta bytes and three uvarints
// (key length, value length, expiry), the key, the value, and a big-endian
// CRC-32C of all of it. A log file starts with a 20-byte header (an
// encryption key id and IV; zero here). Replay stops at the first entry
// that does not parse, whose CRC does not match, or that breaks a
// transaction; a writable open then truncates the file there.
const (
	logFileHeader  = 20
	logEntryMaxHdr = 22
	logBitTxn      = 1 << 6
	logBitFinTxn   = 1 << 7
	logMaxKey      = 1 << 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// logScan is what scanLog found in one Badger log file.
type logScan struct {
	Path    string
	Size    int64
	End     int64  // where Badger's replay stops (and a writable open truncates)
	Damage  string // non-empty: a whole entry past End, which a crash cannot have left
	Entries int    // entries Badger's replay accepts
}

// logEntryAt decodes the entry at off: its total length, meta byte, key
// and value, and whether it is whole (parses, fits, CRC matches).
func logEntryAt(b []byte, off int64) (n int64, meta byte, key, val []byte, whole bool) {
	rest := b[off:]
	if len(rest) < 2 {
		return 0, 0, nil, nil, false
	}
	meta = rest[0]
	i := 2
	var lens [3]uint64
	for k := range lens {
		v, w := binary.Uvarint(rest[i:])
		if w <= 0 {
			return 0, meta, nil, nil, false
		}
		lens[k], i = v, i+w
	}
	if lens[0] > logMaxKey || lens[1] > math.MaxUint32 {
		return 0, meta, nil, nil, false
	}
	n = int64(i) + int64(lens[0]) + int64(lens[1]) + 4
	if n > int64(len(rest)) {
		return n, meta, nil, nil, false
	}
	body := rest[:n-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(rest[n-4:n]) {
		return n, meta, nil, nil, false
	}
	key = body[i : i+int(lens[0])]
	return n, meta, key, body[i+int(lens[0]):], true
}

// keyTs is Badger's y.ParseTs: the version in a key's last 8 bytes.
func keyTs(key []byte) uint64 {
	if len(key) <= 8 {
		return 0
	}
	return math.MaxUint64 - binary.BigEndian.Uint64(key[len(key)-8:])
}

// scanLogBytes replays b as Badger does, then judges what lies past the
// point where replay stops. A kill -9 can leave only a torn tail there:
// whole entries of a transaction whose finishing entry was never written,
// then at most one entry copied in part. A whole entry after that point
// (found by trying every offset that could start one) is committed data
// that Badger's truncation would destroy, and is reported as damage.
func scanLogBytes(b []byte, lastNonZero func(from int64) int64) logScan {
	s := logScan{Size: int64(len(b)), End: logFileHeader}
	if s.Size < logFileHeader {
		s.End = s.Size
		return s
	}
	off := int64(logFileHeader)
	var txn, lastTs uint64
	for off < s.Size {
		n, meta, key, val, whole := logEntryAt(b, off)
		if !whole || len(key) == 0 {
			break
		}
		if meta&logBitTxn != 0 {
			ts := keyTs(key)
			if txn == 0 {
				txn = ts
			}
			if txn != ts {
				break
			}
		} else if meta&logBitFinTxn != 0 {
			ts, err := strconv.ParseUint(string(val), 10, 64)
			if err != nil || ts != txn {
				break
			}
			txn = 0
			s.End = off + n
		} else {
			if txn != 0 {
				break
			}
			s.End = off + n
		}
		s.Entries++
		lastTs = max(lastTs, keyTs(key))
		off += n
	}
	// Past End: walk the whole entries a torn transaction left; a
	// finishing or standalone entry among them is committed data.
	off = s.End
	for off < s.Size {
		n, meta, key, _, whole := logEntryAt(b, off)
		if !whole || len(key) == 0 {
			break
		}
		if meta&logBitTxn == 0 {
			s.Damage = fmt.Sprintf("replay stops at offset %d but a whole entry follows at offset %d", s.End, off)
			return s
		}
		off += n
	}
	last := lastNonZero(off)
	if last < 0 {
		return s // zeros: a clean end, or a torn transaction
	}
	// One entry may be torn: Go's copy of a large buffer stores its head
	// last, so a torn entry can be zeros then data, in any mix. A whole
	// entry anywhere after it, though, is data a crash did not leave —
	// unless it is file content that happens to hold a Badger log (a
	// workspace may keep one): such an entry's version is unrelated to
	// this log's, so only one no older than the last replayed entry
	// counts.
	for q := off + 1; q <= last; q++ {
		if !plausibleHeader(b[q:]) {
			continue
		}
		if _, _, key, _, whole := logEntryAt(b, q); whole && len(key) > 0 && keyTs(key) >= lastTs {
			s.Damage = fmt.Sprintf("bad entry at offset %d, and a whole entry at offset %d after it", off, q)
			return s
		}
	}
	return s
}

// plausibleHeader is a cheap filter before a CRC check: reynfs never sets
// Badger's user meta or an expiry, and meta holds only Badger's low flag
// bits and its transaction bits.
func plausibleHeader(b []byte) bool {
	if len(b) < 5 || b[0]&^(logBitTxn|logBitFinTxn|0x0f) != 0 || b[1] != 0 {
		return false
	}
	i := 2
	for range 2 {
		v, w := binary.Uvarint(b[i:])
		if w <= 0 || v == 0 && i == 2 {
			return false
		}
		i += w
	}
	return i < len(b) && b[i] == 0
}

// scanLog maps path read-only and scans it (see scanLogBytes). Holes are
// skipped with SEEK_DATA, so the sparse, mostly empty files Badger
// preallocates cost little.
func scanLog(path string) (logScan, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return logScan{}, fmt.Errorf("scan %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return logScan{}, fmt.Errorf("scan %s: %w", filepath.Base(path), err)
	}
	size := fi.Size()
	if size == 0 {
		return logScan{Path: path}, nil
	}
	if size > math.MaxInt32*2 {
		return logScan{}, fmt.Errorf("scan %s: %w: %d bytes, more than a Badger log holds", filepath.Base(path), ErrCorrupt, size)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return logScan{}, fmt.Errorf("scan %s: map: %w", filepath.Base(path), err)
	}
	defer unix.Munmap(b)
	fd := int(f.Fd())
	s := scanLogBytes(b, func(from int64) int64 { return lastNonZeroSparse(fd, b, from) })
	s.Path = path
	return s, nil
}

// lastNonZeroSparse returns the offset of the last non-zero byte at or
// after from, or -1, reading only the file's data extents.
func lastNonZeroSparse(fd int, b []byte, from int64) int64 {
	last := int64(-1)
	size := int64(len(b))
	for from < size {
		data, err := unix.Seek(fd, from, unix.SEEK_DATA)
		if err != nil { // ENXIO: no data past from
			break
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil || hole > size {
			hole = size
		}
		for i := hole - 1; i >= data; i-- {
			if b[i] != 0 {
				last = i
				break
			}
		}
		from = hole
	}
	return last
}

// scanLogs checks the log files a writable Badger open would truncate:
// every memtable WAL (*.mem) and the newest value log (*.vlog). It returns
// every scan, and an error wrapping ErrCorrupt naming the first damage.
func scanLogs(dir string) ([]logScan, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("scan logs: %w", err)
	}
	var mems []string
	var newest string
	newestID := -1
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".mem"):
			mems = append(mems, name)
		case strings.HasSuffix(name, ".vlog"):
			id, err := strconv.Atoi(strings.TrimSuffix(name, ".vlog"))
			if err == nil && id > newestID {
				newest, newestID = name, id
			}
		}
	}
	sort.Strings(mems)
	if newest != "" {
		mems = append(mems, newest)
	}
	var out []logScan
	var failed, damaged error
	for _, name := range mems {
		s, err := scanLog(filepath.Join(dir, name))
		if err != nil {
			if failed == nil {
				failed = err
			}
			continue
		}
		out = append(out, s)
		if s.Damage != "" && damaged == nil {
			damaged = logDamage{fmt.Errorf("%w: Badger log %s: %s (the store was not modified; `reynfs fsck --repair` rebuilds Badger's index from the segment log, `reynfs fsck --salvage OUTDIR` reads what is intact)",
				ErrCorrupt, name, s.Damage)}
		}
	}
	if failed != nil {
		if !errors.Is(failed, ErrCorrupt) {
			failed = fmt.Errorf("%w: %v", ErrCorrupt, failed)
		}
		return out, failed // a log that could not be read comes first: Repair cannot help it
	}
	return out, damaged
}

// logDamage is a scanLogs error that is damage inside a Badger log
// (Repair's to cut), not a log it could not read.
type logDamage struct{ error }

func (e logDamage) Unwrap() error { return e.error }

func isLogDamage(err error) bool {
	var d logDamage
	return errors.As(err, &d)
}
