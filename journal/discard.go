package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Badger's DISCARD file (its value-log GC statistics) is 1 MiB, mapped,
// and allocated whole while the store is open (space.go: a store into a
// hole of a mapping is SIGBUS on a full disk). It holds 16 bytes per
// value-log file, so all but its first page are zeros: a closed store
// need not keep 1 MiB of disk for them (docs/storage.md, format 3: an
// eighth of the benchmark's store). Close digs holes in its zero pages
// and a writable open allocates it whole again before Badger maps it.
//
// Close digs before Badger closes, while Badger's directory lock still
// keeps every other process out: after it, another daemon may already
// have mapped the file, and a hole under its mapping is SIGBUS on a full
// disk. Badger, still open, only appends 16-byte slots after its last
// one (a compaction that ends meanwhile adds one per value-log file), so
// the page after the last non-zero byte stays allocated too.

const discardName = "DISCARD"

// digPage is the granularity of digHoles: a page, the unit a mapping
// faults in and the file system's block on every file system we run on.
const digPage = 4096

// digHoles deallocates the all-zero pages of the file at path from the
// page after the one holding its last non-zero byte (its content does not
// change: a hole reads as zeros). It is best effort: a file system without
// hole punching keeps the blocks, and any failure only leaves disk
// allocated.
func digHoles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := readAllAt(f)
	if err != nil {
		return err
	}
	last := bytes.LastIndexFunc(data, func(r rune) bool { return r != 0 })
	start := 0
	if last >= 0 {
		start = (last/digPage + 2) * digPage
	} else {
		start = digPage // Badger's next slot is at the start
	}
	zero := make([]byte, digPage)
	for off := start; off < len(data); {
		end := off
		for end < len(data) && bytes.Equal(data[end:min(end+digPage, len(data))], zero[:min(digPage, len(data)-end)]) {
			end += digPage
		}
		if end == off {
			off += digPage
			continue
		}
		end = min(end, len(data))
		err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(off), int64(end-off))
		if err == unix.EOPNOTSUPP {
			return nil
		}
		if err != nil {
			return err
		}
		off = end
	}
	return nil
}

func readAllAt(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	data := make([]byte, fi.Size())
	n, err := f.ReadAt(data, 0)
	if n == len(data) {
		err = nil
	}
	return data[:n], err
}

// releaseDiscard gives back the zero pages of DISCARD of a store about
// to close (Badger open, the committer stopped).
func releaseDiscard(dir string) { _ = digHoles(filepath.Join(dir, discardName)) }

// reallocDiscard allocates a closed store's DISCARD whole again before
// Badger maps it, as space does for an open store. A full disk only
// postpones it to the first commit (space.prepare), which refuses the
// commit with ErrNoSpace rather than let a write fault.
func reallocDiscard(dir string) { _ = allocWhole(filepath.Join(dir, discardName)) }
