package cas

import (
	"errors"
	"fmt"
	"io"
)

// The read path of a store with a segment log.
//
// A read that missed the object cache used to cost a Badger lookup (the
// object's Loc), a fresh 64 KiB buffer (zeroed by Go, then garbage) and a
// BLAKE3 hash of the whole chunk, on every read: a sequential read of a
// file larger than the cache paid all three for every chunk, every time
// (hashing alone was a third of the daemon's CPU in fio's warm read), and
// a random 4 KiB read paid them for 64 KiB. Now:
//
//   - The locations of objects read once are remembered (locCache, by
//     hash, bounded): later reads go straight to the segment, no Badger
//     lookup.
//   - An object is verified by hash once, when first read; what is
//     remembered with its location is the CRC-32C of each 4 KiB page of
//     its bytes as verified. A later read of the same location checks
//     the CRCs of the pages it read (hardware CRC-32C, about ten times
//     faster than BLAKE3 here), so damage to a segment after the first
//     read is still caught: a mismatch falls back to a fresh lookup and
//     a full hash check, which returns ErrCorrupt if the bytes really
//     are bad. CRC-32C catches every error burst up to 32 bits and other
//     random damage but for one chance in 2^32, as the frame checksums
//     do; it is no defence against a forged segment, but neither is the
//     hash once the index can be forged too.
//   - The mount's bigger READs (fs/splice.go) do not come here for an
//     object whose location is remembered: its bytes are spliced from
//     the segment into the reply (splice.go) and, never being in the
//     daemon's memory, are not checked again after the first read.
//   - ReadRange reads the pages a request wants of an uncompressed
//     object straight into the caller's buffer (the FUSE reply buffer):
//     no allocation, no cache churn for the big sequential reads the
//     kernel keeps in its own page cache, and 4 KiB, not 64 KiB, for a
//     random 4 KiB read of a chunk read before.
//
// The remembered locations go stale when the compactor moves an object
// or a sweep deletes it; both forget the hashes they change (after the
// index change, advancing an epoch so that a read that looked the old
// location up just before cannot remember it again). A stale entry is
// harmless anyway: the old segment stays readable until it is retired,
// and after that the read fails and falls back to a fresh lookup, as a
// CRC mismatch does; segment numbers are never reused.

// RangeReader is a Store that reads part of an object into a buffer of
// the caller's, for a reply that is sent and then forgotten.
type RangeReader interface {
	// ReadRange returns the bytes of object h from off on, at most
	// len(dst) of them (fewer at the object's end, none past it),
	// checked as Get checks them. They are either read into dst (the
	// result is then a prefix of dst) or shared with the store's cache
	// (do not modify them).
	ReadRange(h Hash, off int, dst []byte) ([]byte, error)
}

var _ RangeReader = (*Badger)(nil)

// ReadRange implements RangeReader. Bytes read into dst are not cached;
// an object read whole for a range of it (the first read, or a
// compressed one) is.
func (b *Badger) ReadRange(h Hash, off int, dst []byte) ([]byte, error) {
	if data, ok := b.cache.get(h); ok {
		return clip(data, off, len(dst)), nil
	}
	if b.log != nil {
		if e, ok := b.locs.get(h); ok && raw(e.loc) {
			end := min(off+len(dst), int(e.loc.Raw))
			if off >= end {
				return nil, nil
			}
			p := dst[:end-off]
			if b.log.readInto(e.loc.Seg, e.loc.Off+int64(off), p) == nil && e.check(p, off) {
				return p, nil
			}
			// Unaligned, moved, retired or damaged: read it whole below.
		}
	}
	epoch := b.cache.currentEpoch()
	var data []byte
	var into bool
	var err error
	if off == 0 {
		data, into, err = b.get(h, dst)
	} else {
		data, into, err = b.get(h, nil)
	}
	if err != nil {
		return nil, err
	}
	if !into {
		b.cache.add(h, data, epoch)
	}
	return clip(data, off, len(dst)), nil
}

// clip returns data[off:off+n], cut at the end of data.
func clip(data []byte, off, n int) []byte {
	if off >= len(data) {
		return nil
	}
	return data[off:min(off+n, len(data))]
}

// raw reports whether the object at loc is stored as it is.
func raw(loc Loc) bool { return loc.Comp == compRaw && loc.Stored == loc.Raw }

// fitsInto reports whether the object at loc is read into dst rather
// than into a buffer of its own.
func fitsInto(loc Loc, dst []byte) bool { return raw(loc) && int(loc.Raw) <= len(dst) }

// get reads h from the store (not the cache): from a remembered location
// when the CRCs there match, else by an index lookup and a full hash
// check, after which the location is remembered. into reports that the
// object was read into dst (see fitsInto) and the result aliases it.
func (b *Badger) get(h Hash, dst []byte) (data []byte, into bool, err error) {
	return b.getVia(h, dst, false)
}

// getVia is get; with chains set, dst also takes a delta chain's whole
// bottom (undelta), and into reports whether the result aliases dst
// however it was read (GetOnceInto).
func (b *Badger) getVia(h Hash, dst []byte, chains bool) (data []byte, into bool, err error) {
	if b.log != nil {
		if e, ok := b.locs.get(h); ok {
			into = fitsInto(e.loc, dst)
			data, err = b.readLoc(h, e.loc, dst, chains)
			if err == nil && e.check(data, 0) {
				if chains {
					into = aliases(data, dst)
				}
				return data, into, nil
			}
			// Moved, retired or damaged since: look it up again, and
			// check the bytes in full.
		}
	}
	epoch := b.locs.currentEpoch()
	data, loc, found, inLog, err := b.lookup(h, true)
	if b.afterLookup != nil {
		b.afterLookup()
	}
	if err == nil && !found {
		if f := b.fetcher.Load(); f != nil {
			return b.fetch(*f, h)
		}
		return nil, false, fmt.Errorf("get %s: %w", h.Short(), ErrNotFound)
	}
	into = false
	if err == nil && inLog {
		data, err = b.readLoc(h, loc, dst, chains)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			// The compactor may have moved the object (or a base on its
			// delta chain) and retired its segment between the lookup
			// and the read: the index then names the copy.
			var again Loc
			if _, again, found, inLog, _ = b.lookup(h, true); found && inLog && (again != loc || again.Comp == compDelta) {
				loc = again
				data, err = b.readLoc(h, loc, dst, chains)
			}
		}
		into = fitsInto(loc, dst)
	}
	if err != nil {
		return nil, false, fmt.Errorf("get %s: %w", h.Short(), err)
	}
	if Sum(data) != h {
		return nil, false, fmt.Errorf("get %s: %w", h, ErrCorrupt)
	}
	if inLog {
		b.locs.add(h, locEntry{loc: loc, crcs: pageCRCs(data)}, epoch)
	}
	if chains {
		into = aliases(data, dst)
	}
	return data, into, nil
}

// aliases reports whether data starts where dst does.
func aliases(data, dst []byte) bool {
	return len(data) > 0 && cap(dst) > 0 && &data[0] == &dst[:1][0]
}

// readLoc reads the object at loc, into dst when it fits (fitsInto); with
// chains set, a delta chain's whole bottom goes into dst too.
func (b *Badger) readLoc(h Hash, loc Loc, dst []byte, chains bool) ([]byte, error) {
	if !fitsInto(loc, dst) {
		if chains {
			return b.getLoggedInto(h, loc, dst)
		}
		return b.getLogged(h, loc)
	}
	data := dst[:loc.Raw]
	if err := b.log.readInto(loc.Seg, loc.Off, data); err != nil {
		return nil, err
	}
	return data, nil
}

// readInto fills p from segment seg at off (readAt into a given buffer).
func (l *segLog) readInto(seg uint64, off int64, p []byte) error {
	f, err := l.file(seg)
	if err != nil {
		return err
	}
	got, err := f.ReadAt(p, off)
	if got == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		// The index points past the end of the segment: the bytes are
		// gone, which for the object is damage like a wrong hash.
		err = fmt.Errorf("%d of %d bytes: %w", got, len(p), ErrCorrupt)
	}
	return fmt.Errorf("read %s at %d: %w", f.Name(), off, err)
}

// forgetMoved drops the remembered locations of objects the compactor
// has just switched to their copies.
func (b *Badger) forgetMoved(old []blobEntry) {
	if len(old) == 0 {
		return
	}
	hs := make([]Hash, len(old))
	for i, e := range old {
		hs[i] = e.h
	}
	b.locs.forget(hs)
}
