package daemon

// A lazy clone's store (clone --lazy) is served like any other: its
// objects on the remote are fetched below the live tree, by the store's
// Fetcher (rewind/replica lazyfetch.go), on a read's miss. The daemon
// only opens that origin, runs the prefetcher in the background after
// the mount (unless --prefetch=false, or clone --prefetch=false and no
// --prefetch), reports it in status, and, before the write-back at
// unmount (which writes every file into the project directory), fetches
// what is left in coalesced ranges rather than one object per read.

import (
	"context"
	"sync"
	"time"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind/replica"
)

type lazyState struct {
	origin *replica.Lazy
	stop   context.CancelFunc
	done   chan struct{}
}

// openLazy attaches the store's lazy origin, if it has one.
func (d *Daemon) openLazy() error {
	l, err := replica.OpenLazy(context.Background(), d.j, DBPath(d.cfg.Store), replica.LazyOptions{Log: d.log})
	if err != nil || l == nil {
		return err
	}
	d.lazy.origin = l
	st := l.Stats()
	d.log.Info().Str("remote", l.Remote()).Int64("objects", st.RemoteObjects).Int64("bytes", st.RemoteBytes).Msg("lazy store: objects on the remote are fetched on first read")
	return nil
}

// startPrefetch keeps the store's pin on the remote renewed (pins.go in
// rewind/replica) and runs the prefetcher when asked to, in the
// background. (A renewal never follows the prefetcher's deletion of the
// pin: replica orders the two.)
func (d *Daemon) startPrefetch() {
	l := d.lazy.origin
	if l == nil || l.Complete() {
		return
	}
	on := l.PrefetchDefault()
	if d.cfg.Prefetch != nil {
		on = *d.cfg.Prefetch
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.lazy.stop, d.lazy.done = cancel, make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { d.renewPin(ctx, l) })
	if on {
		wg.Go(func() {
			if err := l.Prefetch(ctx); err != nil && ctx.Err() == nil {
				d.log.Error().Err(err).Str("remote", l.Remote()).Msg("lazy store: prefetch stopped; reads still fetch what they need")
			}
		})
	}
	go func() {
		wg.Wait()
		close(d.lazy.done)
	}()
}

// renewPin renews the lazy store's pin when it is a day old: now and
// every hour, until ctx ends or the store is whole.
func (d *Daemon) renewPin(ctx context.Context, l *replica.Lazy) {
	warned := false
	for !l.Complete() {
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
		err := l.RenewPin(rctx)
		rcancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil && !warned {
			d.log.Warn().Err(err).Str("remote", l.Remote()).Msg("lazy store: could not renew its pin on the remote; remote gc may delete data not fetched yet once generations it reads are forgotten (retried hourly)")
		}
		warned = err != nil
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Hour):
		}
	}
}

// finishLazy stops the background prefetcher and, before the write-back
// reads every file, fetches what is left (errors are logged: the
// write-back then reports the paths it could not read).
func (d *Daemon) finishLazy() {
	l := d.lazy.origin
	if l == nil {
		return
	}
	if d.lazy.stop != nil {
		d.lazy.stop()
		<-d.lazy.done
	}
	if !l.Complete() {
		if err := l.Prefetch(context.Background()); err != nil {
			d.log.Error().Err(err).Str("remote", l.Remote()).Msg("lazy store: fetching the rest before the write-back failed")
		}
	}
}

// closeLazy detaches the origin (before the journal closes).
func (d *Daemon) closeLazy() {
	if d.lazy.origin != nil {
		_ = d.lazy.origin.Close()
	}
}

// lazyStatus is status's lazy part (nil: not lazy).
func (d *Daemon) lazyStatus() *api.LazyStatus {
	if d.lazy.origin == nil {
		return nil
	}
	s := LazyStatusOf(d.lazy.origin.Stats())
	s.Complete = d.lazy.origin.Complete()
	return s
}

// lazyStatusOf is the lazy part of the status of the store j (nil: not
// lazy), for an unmounted store.
func lazyStatusOf(j *journal.Journal) *api.LazyStatus {
	l := replica.LazyOf(j)
	if l == nil || l.Complete() {
		return nil
	}
	return LazyStatusOf(l.Stats())
}

// LazyStatusOf converts replica's counters to the API's.
func LazyStatusOf(s replica.LazyStats) *api.LazyStatus {
	return &api.LazyStatus{Remote: s.Remote, RemoteObjects: s.RemoteObjects, RemoteBytes: s.RemoteBytes,
		DemandObjects: s.DemandObjects, DemandBytes: s.DemandBytes, DemandRequests: s.DemandRequests,
		PrefetchObjects: s.PrefetchObjs, PrefetchBytes: s.PrefetchBytes, PrefetchRequests: s.PrefetchReqs,
		Prefetching: s.Prefetching}
}
