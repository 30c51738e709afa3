package cas

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
)

// The read path of a store with a segment log.
//
// A read that misses the object cache used to cost a Badger lookup (the
// object's Loc), a fresh 64 KiB buffer (zeroed by Go, then garbage) and a
// BLAKE3 hash of the bytes, on every read: a sequential read of a file
// larger than the cache paid all three for every chunk, every time, and
// hashing alone was a third of the daemon's CPU in fio's warm read. Now:
//
//   - The locations of objects read once are remembered (locCache, by
//     hash): later reads go straight to the segment, no Badger lookup.
//   - An object is verified by hash once, when first read; what is
//     remembered with its location is the CRC-32C of its bytes as
//     verified. A later read of the same location checks that CRC
//     (hardware CRC-32C, about ten times faster than BLAKE3 here), so damage
//     to a segment after the first read is still caught: a mismatch falls
//     back to a fresh lookup and a full hash check, which returns
//     ErrCorrupt if the bytes really are bad. CRC-32C catches every error
//     burst up to 32 bits and any other random damage but for one chance
//     in 2^32, as the frame checksums do; it is no defence against a
//     forged segment, but neither is the hash once the index is forged.
//   - GetInto reads an uncompressed object straight into the caller's
//     buffer (the FUSE reply buffer): no allocation and no cache churn
//     for the big sequential reads the kernel keeps in its own page cache.
//
// The remembered locations go stale when the compactor moves an object
// or a sweep deletes it; both forget the hashes they change (after the
// index change, advancing an epoch so that a read that looked the old
// location up just before cannot remember it again). A stale entry is
// harmless anyway: the old segment stays readable until it is retired,
// and after that the read fails and falls back to a fresh lookup, as a
// CRC mismatch does; segment numbers are never reused.

// locCacheEntries bounds the remembered locations: 2 GiB of 64 KiB chunks,
// about 3 MiB of memory.
const locCacheEntries = 1 << 15

// locEntry is where a verified object's bytes are and their CRC-32C.
type locEntry struct {
	loc Loc
	crc uint32
}

// locCache remembers the locations of objects read and verified, safe for
// concurrent use. When full it drops an arbitrary entry (Go's map
// iteration starts at a random place), which unlike LRU keeps part of a
// cyclic scan bigger than the cache.
type locCache struct {
	mu    sync.Mutex
	max   int
	epoch uint64
	m     map[Hash]locEntry
}

func newLocCache(max int) *locCache {
	return &locCache{max: max, m: make(map[Hash]locEntry)}
}

func (c *locCache) get(h Hash) (locEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[h]
	return e, ok
}

// currentEpoch is read before the lookup whose result goes to add.
func (c *locCache) currentEpoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// add remembers e for h unless forget ran since epoch was read.
func (c *locCache) add(h Hash, e locEntry, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch || c.max <= 0 {
		return
	}
	if _, ok := c.m[h]; !ok && len(c.m) >= c.max {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[h] = e
}

// forget drops the entries of hs and advances the epoch.
func (c *locCache) forget(hs []Hash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	for _, h := range hs {
		delete(c.m, h)
	}
}

func (c *locCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// IntoGetter is a Store that can read an object into a buffer of the
// caller's, for a reply that is sent and then forgotten.
type IntoGetter interface {
	// GetInto returns the object h, checked as Get checks it. When the
	// object is not cached and its bytes fit in dst they are read into
	// dst and the result is dst[:len(object)], not cached; otherwise it
	// is what Get returns (shared: do not modify it).
	GetInto(h Hash, dst []byte) ([]byte, error)
}

var _ IntoGetter = (*Badger)(nil)

// GetInto implements IntoGetter.
func (b *Badger) GetInto(h Hash, dst []byte) ([]byte, error) {
	if data, ok := b.cache.get(h); ok {
		return data, nil
	}
	epoch := b.cache.currentEpoch()
	data, into, err := b.get(h, dst)
	if err != nil {
		return nil, err
	}
	if !into {
		b.cache.add(h, data, epoch)
	}
	return data, nil
}

// fitsInto reports whether the object at loc is read into dst rather
// than into a buffer of its own.
func (b *Badger) fitsInto(loc Loc, dst []byte) bool {
	return loc.Comp == compRaw && loc.Stored == loc.Raw && int(loc.Raw) <= len(dst)
}

// get reads h from the store (not the cache): from a remembered location
// when the CRC there matches, else by an index lookup and a full hash
// check, after which the location is remembered. into reports that the
// object was read into dst (see fitsInto) and the result aliases it.
func (b *Badger) get(h Hash, dst []byte) (data []byte, into bool, err error) {
	if b.log != nil {
		if e, ok := b.locs.get(h); ok {
			into = b.fitsInto(e.loc, dst)
			data, err = b.readLoc(h, e.loc, dst)
			if err == nil && crc32.Checksum(data, castagnoli) == e.crc {
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
		return nil, false, fmt.Errorf("get %s: %w", h.Short(), ErrNotFound)
	}
	into = false
	if err == nil && inLog {
		data, err = b.readLoc(h, loc, dst)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			// The compactor may have moved the object and retired its
			// segment between the lookup and the read: the index then
			// names the copy.
			var again Loc
			if _, again, found, inLog, _ = b.lookup(h, true); found && inLog && again != loc {
				loc = again
				data, err = b.readLoc(h, loc, dst)
			}
		}
		into = b.fitsInto(loc, dst)
	}
	if err != nil {
		return nil, false, fmt.Errorf("get %s: %w", h.Short(), err)
	}
	if Sum(data) != h {
		return nil, false, fmt.Errorf("get %s: %w", h, ErrCorrupt)
	}
	if inLog {
		b.locs.add(h, locEntry{loc: loc, crc: crc32.Checksum(data, castagnoli)}, epoch)
	}
	return data, into, nil
}

// readLoc reads the object at loc, into dst when it fits (fitsInto).
func (b *Badger) readLoc(h Hash, loc Loc, dst []byte) ([]byte, error) {
	if !b.fitsInto(loc, dst) {
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
