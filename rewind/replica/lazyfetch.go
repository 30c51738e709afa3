package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/journal"
)

// Lazy is a lazy store's origin: the cas.Fetcher that fetches an object
// the store lacks with one ranged GET of it from its pack, and the
// prefetcher (prefetch.go). Readers of one object share one GET; a
// failed fetch is remembered for FailFor, so that a reader that retries
// at once (the live tree's write under its lock after the same read
// failed outside it) fails at once instead of waiting on the network
// again.
type Lazy struct {
	b     objstore.Backend
	j     *journal.Journal
	objs  *cas.Badger
	dir   string
	meta  *lazyMeta
	index *entryFile
	log   zerolog.Logger
	// store: put what is fetched into the store (false for a read-only
	// open: fsck); the bytes are returned either way.
	store bool
	// FailFor is how long a failed fetch of an object answers the next
	// fetch of it with the same error (0: always ask again).
	FailFor time.Duration

	putMu   sync.Mutex // one put at a time: the counts stay exact
	mu      sync.Mutex
	flights map[cas.Hash]*flight
	failed  map[cas.Hash]failure
	closed  bool

	demand                     atomic.Int64 // demand fetches in flight
	joined                     atomic.Int64 // fetches that shared another's GET (tests)
	yielded                    atomic.Int64 // prefetch batches that waited for demand fetches (tests)
	demandWake                 chan struct{}
	stats                      lazyCounters
	remainObjs, remainBytes    atomic.Int64
	complete                   atomic.Bool
	prefetchOn, prefetchActive atomic.Bool

	// lazyextra.go: the objects fetches added, and origin.json's packs
	// (meta.Packs) as they grow; finMu orders additions and finish.
	xmu   sync.RWMutex
	extra map[cas.Hash]lazyEntry
	finMu sync.Mutex
}

type flight struct {
	done chan struct{}
	data []byte
	err  error
}

type failure struct {
	err   error
	until time.Time
}

type lazyCounters struct {
	demandObjs, demandBytes, demandReqs       atomic.Int64
	prefetchObjs, prefetchBytes, prefetchReqs atomic.Int64
}

// LazyStats is what status shows of a lazy store.
type LazyStats struct {
	Remote         string `json:"remote"`
	Lazy           bool   `json:"lazy"` // objects remain on the remote
	RemoteObjects  int64  `json:"remote_objects"`
	RemoteBytes    int64  `json:"remote_bytes"` // as stored on the remote
	DemandObjects  int64  `json:"demand_objects"`
	DemandBytes    int64  `json:"demand_bytes"`
	DemandRequests int64  `json:"demand_requests"`
	PrefetchObjs   int64  `json:"prefetch_objects"`
	PrefetchBytes  int64  `json:"prefetch_bytes"`
	PrefetchReqs   int64  `json:"prefetch_requests"`
	Prefetching    bool   `json:"prefetching"`
}

// LazyOptions open a lazy origin.
type LazyOptions struct {
	// Backend: the remote (nil: objstore.Open of the URL the store
	// recorded).
	Backend objstore.Backend
	Log     zerolog.Logger
	// ReadOnly: the journal is open read-only; fetched objects are not
	// stored.
	ReadOnly bool
	// Fresh: the store was just made by CloneLazy and lacks every
	// entry of its index: the counts come from origin.json, with no
	// pass over the index (a Has per entry).
	Fresh bool
	// Uncounted: the caller only reads through the store (a replay)
	// and reports nothing: no pass, no counts, no whole check.
	Uncounted bool
}

// OpenLazy attaches the lazy origin of the store whose Badger directory
// is dir (journal j, opened on it) as j's object store's Fetcher. It
// returns nil, nil for a store that is not lazy. The caller Closes it
// before closing j.
func OpenLazy(ctx context.Context, j *journal.Journal, dir string, o LazyOptions) (*Lazy, error) {
	if !IsLazy(dir) {
		return nil, nil
	}
	meta, err := readLazyMeta(dir)
	if err != nil {
		return nil, err
	}
	b := o.Backend
	if b == nil {
		if b, err = objstore.Open(ctx, meta.Remote); err != nil {
			return nil, fmt.Errorf("lazy store's remote: %w", err)
		}
	}
	ix, err := openEntries(filepath.Join(LazyPath(dir), lazyIndex))
	if err != nil {
		return nil, err
	}
	l := &Lazy{b: b, j: j, objs: j.Objects(), dir: dir, meta: meta, index: ix, log: o.Log, store: !o.ReadOnly,
		FailFor: 2 * time.Second, flights: map[cas.Hash]*flight{}, failed: map[cas.Hash]failure{}, demandWake: make(chan struct{})}
	if err := l.loadExtra(); err != nil {
		_ = ix.f.Close()
		return nil, err
	}
	for _, le := range l.extra {
		if ok, err := l.objs.Has(le.e.Hash); err != nil {
			_ = ix.f.Close()
			return nil, err
		} else if !ok {
			l.remainObjs.Add(1)
			l.remainBytes.Add(int64(le.e.Stored))
		}
	}
	// What is still on the remote: the entries the store lacks.
	switch {
	case o.Uncounted:
	case o.Fresh:
		l.remainObjs.Add(meta.Objects)
		l.remainBytes.Add(meta.Bytes)
	default:
		err = ix.each(func(le lazyEntry) error {
			ok, err := l.objs.Has(le.e.Hash)
			if err == nil && !ok {
				l.remainObjs.Add(1)
				l.remainBytes.Add(int64(le.e.Stored))
			}
			return err
		})
	}
	if err != nil {
		_ = ix.f.Close()
		return nil, err
	}
	if l.remainObjs.Load() == 0 && l.store && !o.Uncounted {
		l.complete.Store(true)
		_ = ix.f.Close()
		if err := removeLazy(dir); err != nil {
			return nil, err
		}
		if err := l.unpin(); err != nil {
			l.log.Warn().Err(err).Str("remote", meta.Remote).Msg("lazy store: whole, but its pin on the remote could not be deleted; it expires by itself")
		}
		return nil, nil
	}
	l.objs.SetFetcher(l)
	j.Attached(lazyKey{}, func() any { return &lazyHolder{} }).(*lazyHolder).l.Store(l)
	return l, nil
}

type lazyKey struct{}

type lazyHolder struct{ l atomic.Pointer[Lazy] }

// LazyOf returns the lazy origin OpenLazy attached to j (nil: none, or
// closed).
func LazyOf(j *journal.Journal) *Lazy {
	return j.Attached(lazyKey{}, func() any { return &lazyHolder{} }).(*lazyHolder).l.Load()
}

// Close detaches the origin from the store.
func (l *Lazy) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	already := l.closed
	l.closed = true
	l.mu.Unlock()
	if already {
		return nil
	}
	l.objs.SetFetcher(nil)
	l.j.Attached(lazyKey{}, func() any { return &lazyHolder{} }).(*lazyHolder).l.CompareAndSwap(l, nil)
	return l.index.f.Close()
}

// PrefetchDefault reports whether a mount prefetches unless told
// (clone --prefetch=false turns it off).
func (l *Lazy) PrefetchDefault() bool { return !l.meta.NoPrefetch }

// Complete reports whether the store is whole (nothing left remote).
func (l *Lazy) Complete() bool { return l.complete.Load() }

// Remote is the remote's URL.
func (l *Lazy) Remote() string { return l.meta.Remote }

// Stats returns the counters.
func (l *Lazy) Stats() LazyStats {
	if l == nil {
		return LazyStats{}
	}
	return LazyStats{Remote: l.meta.Remote, Lazy: !l.complete.Load(),
		RemoteObjects: l.remainObjs.Load(), RemoteBytes: l.remainBytes.Load(),
		DemandObjects: l.stats.demandObjs.Load(), DemandBytes: l.stats.demandBytes.Load(), DemandRequests: l.stats.demandReqs.Load(),
		PrefetchObjs: l.stats.prefetchObjs.Load(), PrefetchBytes: l.stats.prefetchBytes.Load(), PrefetchReqs: l.stats.prefetchReqs.Load(),
		Prefetching: l.prefetchActive.Load()}
}

// Names reports whether h is an object the store left on the remote
// (fsck: such an object is not missing).
func (l *Lazy) Names(h cas.Hash) (bool, error) {
	_, ok, err := l.find(h)
	return ok, err
}

var _ cas.Fetcher = (*Lazy)(nil)

// Fetch implements cas.Fetcher: one ranged GET of h from its pack,
// shared by every concurrent reader of h.
func (l *Lazy) Fetch(h cas.Hash) ([]byte, error) {
	le, ok, err := l.find(h)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", cas.ErrFetch, err)
	}
	if !ok {
		return nil, fmt.Errorf("lazy: %w", cas.ErrNotFound)
	}
	l.mu.Lock()
	if f, ok := l.failed[h]; ok {
		if time.Now().Before(f.until) {
			l.mu.Unlock()
			return nil, f.err
		}
		delete(l.failed, h)
	}
	if fl, ok := l.flights[h]; ok {
		l.mu.Unlock()
		l.joined.Add(1)
		<-fl.done
		return fl.data, fl.err
	}
	fl := &flight{done: make(chan struct{})}
	l.flights[h] = fl
	l.mu.Unlock()

	l.demand.Add(1)
	fl.data, fl.err = l.demandGet(le)
	if l.demand.Add(-1) == 0 {
		l.wakePrefetch()
	}
	l.mu.Lock()
	delete(l.flights, h)
	if fl.err != nil && l.FailFor > 0 {
		l.failed[h] = failure{err: fl.err, until: time.Now().Add(l.FailFor)}
	}
	l.mu.Unlock()
	close(fl.done)
	return fl.data, fl.err
}

// demandGet fetches, verifies and stores one object.
func (l *Lazy) demandGet(le lazyEntry) ([]byte, error) {
	key, err := l.packKey(le.pack)
	if err != nil {
		return nil, err
	}
	// Not the request's context: a reader interrupted mid-fetch leaves
	// the object to the other readers of this flight.
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	l.stats.demandReqs.Add(1)
	stored, err := l.b.GetRange(ctx, key, int64(le.e.Off), int64(le.e.Stored))
	if err != nil {
		l.log.Error().Str("remote", l.meta.Remote).Str("key", key).Str("object", le.e.Hash.String()).Err(err).Msg("lazy store: fetch from the remote failed")
		return nil, fmt.Errorf("%w: object %s from %s: %w", cas.ErrFetch, le.e.Hash.Short(), l.meta.Remote, err)
	}
	data, err := Object(key, le.e, stored)
	if err != nil {
		l.log.Error().Str("remote", l.meta.Remote).Str("key", key).Str("object", le.e.Hash.String()).Err(err).Msg("lazy store: the remote's copy is damaged")
		return nil, fmt.Errorf("%w: %w", cas.ErrCorrupt, err)
	}
	l.stats.demandObjs.Add(1)
	l.stats.demandBytes.Add(int64(len(stored)))
	l.put([]cas.Blob{{Hash: le.e.Hash, Data: data}}, []lazyEntry{le})
	return data, nil
}

// fetchTimeout bounds one request to the remote.
const fetchTimeout = 60 * time.Second

// put stores fetched objects (verified) and counts them off the remote.
// A store that fails is logged: the bytes were served, the next read
// fetches again.
func (l *Lazy) put(blobs []cas.Blob, les []lazyEntry) {
	if !l.store {
		return
	}
	l.putMu.Lock()
	defer l.putMu.Unlock()
	var fresh []cas.Blob
	var freshBytes int64
	seen := make(map[cas.Hash]bool, len(blobs))
	for i, b := range blobs {
		if seen[b.Hash] {
			continue
		}
		seen[b.Hash] = true
		if ok, err := l.objs.Has(b.Hash); err == nil && !ok {
			fresh = append(fresh, b)
			freshBytes += int64(les[i].e.Stored)
		}
	}
	if len(fresh) == 0 {
		return
	}
	if err := l.objs.PutBatch(fresh); err != nil {
		l.log.Error().Err(err).Int("objects", len(fresh)).Msg("lazy store: storing fetched objects failed")
		return
	}
	l.remainObjs.Add(-int64(len(fresh)))
	l.remainBytes.Add(-freshBytes)
}

// wakePrefetch tells a prefetcher waiting for demand reads to end.
func (l *Lazy) wakePrefetch() {
	l.mu.Lock()
	close(l.demandWake)
	l.demandWake = make(chan struct{})
	l.mu.Unlock()
}

// removeLazy makes the store whole: its lazy bookkeeping goes.
func removeLazy(dir string) error {
	ld := LazyPath(dir)
	// origin.json first: without it the store is not lazy.
	if err := os.Remove(filepath.Join(ld, lazyOrigin)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("lazy: %w", err)
	}
	return os.RemoveAll(ld)
}
