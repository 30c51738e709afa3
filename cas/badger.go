package cas

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
)

// KeyPrefix is the first byte of every object key in Badger. The journal and
// the other users of the same database keep to other prefixes.
const KeyPrefix = 'o'

// keyLen is the length of an object key: KeyPrefix and the 32 hash bytes.
const keyLen = 1 + len(Hash{})

// Key returns the Badger key of the object named h: KeyPrefix, then h.
func Key(h Hash) []byte {
	k := make([]byte, keyLen)
	k[0] = KeyPrefix
	copy(k[1:], h[:])
	return k
}

// hashOfKey is the inverse of Key; ok is false for a key of another shape.
func hashOfKey(k []byte) (h Hash, ok bool) {
	if len(k) != keyLen || k[0] != KeyPrefix {
		return h, false
	}
	copy(h[:], k[1:])
	return h, true
}

// Badger stores objects in a Badger database that it shares with the
// journal: one key per object (see Key), the object bytes as the value. It
// re-hashes every object it reads from Badger and keeps the verified ones in
// a bounded LRU cache, so a hot object is hashed once. It is safe for
// concurrent use.
type Badger struct {
	db    *badger.DB
	cache *cache
	locs  *locCache // where objects read once are, and their CRC (readcache.go)
	packs packCache // packs decompressed lately (pack.go)

	guard guard // spares from a sweep what writers rely on (guard.go)

	afterLookup func() // tests: runs in Get between the lookup and the read

	// The segment log of a format-2 store (logstore.go); nil for a store
	// of objects inline in Badger.
	log  *segLog
	tail map[Hash]Loc // read-only opens: objects past the index
	// hidden: read-only opens: objects whose index entry a catch-down
	// (catchdown.go) drops.
	hidden map[Hash]bool
	// frameKeys: the prefixes of the keys frames' ops write (catchdown.go).
	frameKeys [][]byte
	// salvaged: a salvage open's tail also holds the log's indexed part
	// (see Indexed), which ends here.
	salvaged *Pos
	inline   bool                    // the index holds 'o' objects (format 1): look there first
	logged   atomic.Int64            // bytes appended since open
	fetcher  atomic.Pointer[Fetcher] // a lazy clone's remote (fetcher.go)
	fault    func(op string) error
}

var _ Store = (*Badger)(nil)

// NewBadger returns a store over db with a cache of DefaultCacheBytes.
// The caller keeps ownership of db (opens, syncs and closes it).
func NewBadger(db *badger.DB) *Badger { return NewBadgerCache(db, DefaultCacheBytes) }

// NewBadgerCache returns a store over db whose verified-object cache holds
// up to cacheBytes (0 turns the cache off).
func NewBadgerCache(db *badger.DB, cacheBytes int64) *Badger {
	return &Badger{db: db, cache: newCache(cacheBytes), locs: newLocCache(locCacheEntries)}
}

// Get returns the object named h after checking that its bytes hash to h
// (once: see readcache.go). The returned slice may be shared with the
// cache: do not modify it.
func (b *Badger) Get(h Hash) ([]byte, error) {
	if data, ok := b.cache.get(h); ok {
		return data, nil
	}
	epoch := b.cache.currentEpoch()
	data, _, err := b.get(h, nil)
	if err != nil {
		return nil, err
	}
	b.cache.add(h, data, epoch)
	return data, nil
}

var _ OnceGetter = (*Badger)(nil)

// GetOnce implements OnceGetter: Get without caching what it reads.
func (b *Badger) GetOnce(h Hash) ([]byte, error) {
	if data, ok := b.cache.get(h); ok {
		return data, nil
	}
	data, _, err := b.get(h, nil)
	if err != nil {
		return nil, err
	}
	return data, nil
}

var _ IntoGetter = (*Badger)(nil)

// GetOnceInto implements IntoGetter: GetOnce that reads the object, or the
// whole bottom of its delta chain, into dst when it fits (an uncompressed
// chunk: a random writer's read-modify-write). into reports whether the
// result aliases dst; when it does not, dst may have served as scratch
// and holds nothing of use.
func (b *Badger) GetOnceInto(h Hash, dst []byte) (data []byte, into bool, err error) {
	if data, ok := b.cache.get(h); ok {
		return data, false, nil
	}
	return b.getVia(h, dst, true)
}

// Has reports whether the object is stored: from the cache, else by a Badger
// key lookup that does not read the value.
func (b *Badger) Has(h Hash) (bool, error) {
	if b.cache.contains(h) {
		return true, nil
	}
	_, _, found, _, err := b.lookup(h, false)
	if err != nil {
		return false, fmt.Errorf("has %s: %w", h.Short(), err)
	}
	return found, nil
}

// maxPutAttempts bounds the retries of a Put that lost a race with a
// concurrent Put of the same new object (badger.ErrConflict).
const maxPutAttempts = 4

// Put stores data under Sum(data) unless that object is already stored, in
// which case it writes nothing. The write is committed, not synced: the
// journal decides when db.Sync runs.
func (b *Badger) Put(data []byte) (Hash, error) {
	h := Sum(data)
	b.guard.note(h)
	if b.cache.contains(h) {
		return h, nil
	}
	if b.log != nil {
		if _, _, err := b.Commit(&Frame{Blobs: []Blob{{Hash: h, Data: data}}}); err != nil {
			return Hash{}, fmt.Errorf("put %s: %w", h.Short(), err)
		}
		return h, nil
	}
	key := Key(h)
	var err error
	for range maxPutAttempts {
		err = b.db.Update(func(txn *badger.Txn) error {
			_, err := txn.Get(key)
			if err == nil || !errors.Is(err, badger.ErrKeyNotFound) {
				return err
			}
			return txn.Set(key, data)
		})
		if !errors.Is(err, badger.ErrConflict) {
			break
		}
	}
	if err != nil {
		return Hash{}, fmt.Errorf("put %s: %w", h.Short(), err)
	}
	return h, nil
}

// AddToBatch adds blob to wb unless the object is already stored, so that the
// journal commits a record and the blobs it references in one batch. It
// trusts blob.Hash to be Sum(blob.Data) (the caller has just computed it; a
// wrong pair would surface as ErrCorrupt on Get). wb keeps blob.Data until
// it is flushed: do not modify it before. Two AddToBatch calls for the same
// new blob before the flush both write it (harmless, the bytes are equal).
func (b *Badger) AddToBatch(wb *badger.WriteBatch, blob Blob) (written bool, err error) {
	b.guard.note(blob.Hash)
	ok, err := b.Has(blob.Hash)
	if err != nil {
		return false, fmt.Errorf("add %s to batch: %w", blob.Hash.Short(), err)
	}
	if ok {
		return false, nil
	}
	if err := wb.Set(Key(blob.Hash), blob.Data); err != nil {
		return false, fmt.Errorf("add %s to batch: %w", blob.Hash.Short(), err)
	}
	return true, nil
}

// Delete removes the objects (missing ones are ignored). It is for the
// garbage collector, which must make sure no concurrent writer is relying
// on one of them being present.
func (b *Badger) Delete(hashes []Hash) error {
	wb := b.db.NewWriteBatch()
	defer wb.Cancel()
	var err error
	for _, h := range hashes {
		if err = wb.Delete(Key(h)); err != nil {
			break
		}
		if b.log != nil {
			if err = wb.Delete(logKey(h)); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = wb.Flush()
	}
	// Evict after the deletes are committed (see cache), and also on failure:
	// some of them may have been committed. The locations go first: a Get
	// that reads the cache's epoch after its remove must not find one.
	b.locs.forget(hashes)
	b.cache.remove(hashes)
	if err != nil {
		return fmt.Errorf("delete %d objects: %w", len(hashes), err)
	}
	return nil
}

// Each calls fn for every stored object, in hash order, with the size of its
// value as Badger reports it without reading it (exact for values kept in
// the LSM tree, within a few bytes for values in the value log). It stops at
// the first error fn returns.
func (b *Badger) Each(fn func(h Hash, size int64) error) error {
	if b.log != nil {
		if err := b.eachLogged(fn); err != nil {
			return fmt.Errorf("list objects: %w", err)
		}
		return nil
	}
	err := b.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte{KeyPrefix}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			h, ok := hashOfKey(item.Key())
			if !ok {
				continue
			}
			if err := fn(h, item.ValueSize()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list objects: %w", err)
	}
	return nil
}

// Stats counts the stored objects and their bytes by a key-only iteration
// (sizes as in Each).
func (b *Badger) Stats() (objects, bytes int64, err error) {
	err = b.Each(func(_ Hash, size int64) error {
		objects++
		bytes += size
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("stats: %w", err)
	}
	return objects, bytes, nil
}

var _ BatchPutter = (*Badger)(nil)

// PutBatch stores the blobs not already stored in one Badger write batch
// (see BatchPutter); duplicates within the batch are written once.
func (b *Badger) PutBatch(blobs []Blob) error {
	if err := checkBlobs(blobs); err != nil {
		return err
	}
	if b.log != nil {
		if _, _, err := b.Commit(&Frame{Blobs: blobs}); err != nil {
			return fmt.Errorf("put batch of %d: %w", len(blobs), err)
		}
		return nil
	}
	wb := b.db.NewWriteBatch()
	defer wb.Cancel()
	seen := make(map[Hash]struct{}, len(blobs))
	for _, bl := range blobs {
		if _, dup := seen[bl.Hash]; dup {
			continue
		}
		seen[bl.Hash] = struct{}{}
		// wb keeps Data until Flush; PutBatch returns after it.
		if _, err := b.AddToBatch(wb, bl); err != nil {
			return fmt.Errorf("put batch: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("put batch of %d: %w", len(blobs), err)
	}
	return nil
}

var _ FreshPutter = (*Badger)(nil)

// PutFresh stores blobs known to be new without re-hashing or looking them
// up (see FreshPutter). A store without a segment log has no cheaper path
// than PutBatch.
func (b *Badger) PutFresh(blobs []Blob) error {
	if b.log == nil {
		return b.PutBatch(blobs)
	}
	if _, _, err := b.Commit(&Frame{Blobs: blobs, Fresh: true}); err != nil {
		return fmt.Errorf("put fresh batch of %d: %w", len(blobs), err)
	}
	return nil
}
