package replica

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/reynfs/reynfs/cas"
)

// The prefetcher fetches what a lazy store still lacks, pack by pack in
// the order the objects lie there (the order file), in coalesced ranged
// GETs of up to PrefetchBatch bytes: consecutive missing objects of one
// pack, with gaps of objects already stored up to prefetchGap read and
// dropped. One batch is in flight at a time, and before each batch it
// waits until no demand fetch is in flight: a demand read never queues
// behind it (it issues its own GET even for an object of the batch in
// flight; both store the same bytes, once). When every object is stored
// and synced, the store stops being lazy.

// PrefetchBatch bounds the bytes of one prefetch request.
var PrefetchBatch = int64(4 << 20)

// prefetchGap: stored objects between two missing ones up to this many
// bytes are read along rather than splitting the request.
const prefetchGap = 256 << 10

// Prefetch runs the prefetcher until every object is stored (then the
// store is whole and the origin detached) or ctx ends. A failed request
// ends it with the error (the demand path still works; a later mount
// prefetches again).
func (l *Lazy) Prefetch(ctx context.Context) error {
	if l == nil || l.complete.Load() {
		return nil
	}
	if !l.prefetchOn.CompareAndSwap(false, true) {
		return fmt.Errorf("prefetch: already running")
	}
	defer l.prefetchOn.Store(false)
	order, err := openEntries(filepath.Join(LazyPath(l.dir), lazyOrder))
	if err != nil {
		return err
	}
	defer order.f.Close()
	if err := l.fetchAll(ctx, order.each); err != nil {
		return fmt.Errorf("prefetch from %s: %w", l.meta.Remote, err)
	}
	extra := func(fn func(lazyEntry) error) error { // lazyextra.go
		for _, le := range l.extraSorted() {
			if err := fn(le); err != nil {
				return err
			}
		}
		return nil
	}
	// A fetch may add objects meanwhile (a follower): a few more rounds.
	for range 3 {
		if err := l.fetchAll(ctx, extra); err != nil {
			return fmt.Errorf("prefetch from %s: %w", l.meta.Remote, err)
		}
		if err := l.finish(); err != nil || l.complete.Load() || !l.store {
			return err
		}
	}
	return nil
}

// fetchAll fetches the entries each yields that the store lacks (in
// pack and offset order), in coalesced ranged GETs.
func (l *Lazy) fetchAll(ctx context.Context, each func(func(lazyEntry) error) error) error {
	var batch []lazyEntry
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := l.prefetchBatch(ctx, batch)
		batch = batch[:0]
		return err
	}
	err := each(func(le lazyEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if ok, err := l.objs.Has(le.e.Hash); err != nil || ok {
			return err
		}
		if n := len(batch); n > 0 {
			first, last := batch[0], batch[n-1]
			end := last.e.Off + uint64(last.e.Stored)
			if le.pack != first.pack || le.e.Off > end+prefetchGap ||
				int64(le.e.Off+uint64(le.e.Stored)-first.e.Off) > PrefetchBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		batch = append(batch, le)
		return nil
	})
	if err == nil {
		err = flush()
	}
	return err
}

// FetchNow fetches the objects hs names that the store lacks (those
// the lazy index does not name are ignored), in coalesced ranges: what
// a lazy clone fetches at once (see CloneLazy).
func (l *Lazy) FetchNow(ctx context.Context, hs []cas.Hash) error {
	if l == nil || len(hs) == 0 {
		return nil
	}
	les, err := l.findAll(hs)
	if err != nil {
		return err
	}
	slices.SortFunc(les, func(a, b lazyEntry) int {
		return cmp.Or(cmp.Compare(a.pack, b.pack), cmp.Compare(a.e.Off, b.e.Off))
	})
	les = slices.CompactFunc(les, func(a, b lazyEntry) bool { return a.e.Hash == b.e.Hash })
	err = l.fetchAll(ctx, func(fn func(lazyEntry) error) error {
		for _, le := range les {
			if err := fn(le); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fetch from %s: %w", l.meta.Remote, err)
	}
	return nil
}

// prefetchBatch fetches one coalesced range of a pack after the demand
// fetches in flight are done, and stores its objects.
func (l *Lazy) prefetchBatch(ctx context.Context, batch []lazyEntry) error {
	for {
		l.mu.Lock()
		wake := l.demandWake
		l.mu.Unlock()
		if l.demand.Load() == 0 {
			break
		}
		l.yielded.Add(1)
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.prefetchActive.Store(true)
	defer l.prefetchActive.Store(false)
	first, last := batch[0], batch[len(batch)-1]
	key, err := l.packKey(first.pack)
	if err != nil {
		return err
	}
	start, end := first.e.Off, last.e.Off+uint64(last.e.Stored)
	rctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	l.stats.prefetchReqs.Add(1)
	got, err := l.b.GetRange(rctx, key, int64(start), int64(end-start))
	if err != nil {
		return err
	}
	if uint64(len(got)) != end-start {
		return fmt.Errorf("%s: %w: %d of %d bytes at %d", key, ErrCorrupt, len(got), end-start, start)
	}
	blobs := make([]cas.Blob, 0, len(batch))
	for _, le := range batch {
		p := got[le.e.Off-start : le.e.Off-start+uint64(le.e.Stored)]
		data, err := Object(key, le.e, p)
		if err != nil {
			return err
		}
		blobs = append(blobs, cas.Blob{Hash: le.e.Hash, Data: data})
	}
	l.stats.prefetchObjs.Add(int64(len(blobs)))
	l.stats.prefetchBytes.Add(int64(len(got)))
	l.put(blobs, batch)
	return nil
}

// finish makes the store whole once nothing is left on the remote.
func (l *Lazy) finish() error {
	if !l.store {
		return nil
	}
	l.finMu.Lock() // no addition meanwhile (lazyextra.go)
	defer l.finMu.Unlock()
	left := 0
	for _, le := range l.extraSorted() {
		if ok, err := l.objs.Has(le.e.Hash); err != nil {
			return err
		} else if !ok {
			left++
		}
	}
	err := l.index.each(func(le lazyEntry) error {
		ok, err := l.objs.Has(le.e.Hash)
		if err == nil && !ok {
			left++
		}
		return err
	})
	if err != nil || left > 0 {
		return err
	}
	if err := l.j.Sync(); err != nil {
		return fmt.Errorf("prefetch: %w", err)
	}
	l.complete.Store(true)
	l.objs.SetFetcher(nil)
	if err := removeLazy(l.dir); err != nil {
		return err
	}
	if err := l.unpin(); err != nil {
		// Harmless beyond keeping packs from gc until it expires.
		l.log.Warn().Err(err).Str("remote", l.meta.Remote).Msg("lazy store: whole, but its pin on the remote could not be deleted; it expires by itself")
	}
	l.log.Info().Str("remote", l.meta.Remote).Int64("objects", l.stats.prefetchObjs.Load()+l.stats.demandObjs.Load()).Msg("lazy store: every object fetched; the store is whole")
	return nil
}
