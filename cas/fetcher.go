package cas

import (
	"errors"
	"fmt"
)

// A lazy store (a clone that left file data on its remote, see
// rewind/replica's lazy.go) holds every inode object but only some
// chunks. The objects it lacks are fetched on a miss, below every
// reader: Get, GetOnce, GetOnceInto and ReadRange all end in one lookup
// (readcache.go getVia), and when that finds nothing and a Fetcher is
// set, the Fetcher is asked. It returns the object's bytes, verified by
// hash, having stored them in this store (so the next read finds them
// locally), or ErrNotFound when it does not know h either (a missing
// object no index names is damage as before). Any other error (the
// remote unreachable, its copy damaged) is returned as it is and does
// NOT wrap ErrNotFound: the live tree reads again under its lock after
// an ErrNotFound (a chunk swept by a concurrent write), and a network
// fetch must never run under that lock.
//
// Has still answers for the local store only: what is on the remote is
// the Fetcher's business (its own counts, fsck's "on the remote").
// Splice never sees a fetched object before it is stored: Spliceable
// answers only for objects in the local log.

// Fetcher supplies objects the store lacks.
type Fetcher interface {
	// Fetch returns the bytes of h, which hash to h and are stored in
	// the store before it returns, or an error wrapping ErrNotFound when
	// h is not the Fetcher's either.
	Fetch(h Hash) ([]byte, error)
}

// Namer is a Fetcher that tells, without fetching, whether it knows h.
type Namer interface {
	Names(h Hash) (bool, error)
}

// OnRemote reports whether h, which the store lacks, is one its Fetcher
// names (a lazy clone's object still on the remote): fsck reports such
// an object as on the remote, not as missing.
func (b *Badger) OnRemote(h Hash) (bool, error) {
	f := b.fetcher.Load()
	if f == nil {
		return false, nil
	}
	n, ok := (*f).(Namer)
	if !ok {
		return false, nil
	}
	return n.Names(h)
}

// ErrFetch: an object the store lacks could not be fetched (the
// Fetcher's error says why and from where). It never wraps ErrNotFound.
var ErrFetch = errors.New("object not fetched")

// SetFetcher makes f supply the objects b lacks (nil: none, b is whole).
func (b *Badger) SetFetcher(f Fetcher) {
	if f == nil {
		b.fetcher.Store(nil)
		return
	}
	b.fetcher.Store(&f)
}

// Lazy reports whether a Fetcher is set.
func (b *Badger) Lazy() bool { return b.fetcher.Load() != nil }

// fetch asks f for h (see Fetcher).
func (b *Badger) fetch(f Fetcher, h Hash) ([]byte, bool, error) {
	data, err := f.Fetch(h)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, false, fmt.Errorf("get %s: %w", h.Short(), ErrNotFound)
		}
		if !errors.Is(err, ErrFetch) {
			err = fmt.Errorf("%w: %w", ErrFetch, err)
		}
		return nil, false, fmt.Errorf("get %s: %w", h.Short(), err)
	}
	if Sum(data) != h { // the Fetcher verified them; a bug must not serve wrong bytes
		return nil, false, fmt.Errorf("get %s: fetched: %w", h.Short(), ErrCorrupt)
	}
	return data, false, nil
}
