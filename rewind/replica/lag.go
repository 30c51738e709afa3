package replica

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/journal"
)

// Lag is what a store knows, without asking the remote beyond its
// config, of one workspace it pushes to or fetched from.
type Lag struct {
	WS string `json:"ws"`
	// Shipped: the seq this store pushed through (0: never pushed);
	// Fetched: the remote seq it holds from a clone or fetch (0: none).
	Shipped uint64 `json:"shipped"`
	Fetched uint64 `json:"fetched,omitempty"`
	Head    uint64 `json:"head"`
	// Records: the store's records after Shipped (what a push sends);
	// RecordBytes their encoded size, objects not counted.
	Records     int   `json:"records"`
	RecordBytes int64 `json:"record_bytes"`
}

// Lags returns, for each workspace of remote b that store j pushed to
// or was cloned from, its shipped seq and the records not yet sent.
// It reads the remote's config (its id keys the bookkeeping) and
// nothing else from b.
func Lags(ctx context.Context, j *journal.Journal, b objstore.Backend) ([]Lag, error) {
	cfg, err := remoteConfig(ctx, b, false)
	if err != nil {
		return nil, err
	}
	loc, err := newLocal(j, cfg)
	if err != nil {
		return nil, err
	}
	by := map[string]*Lag{}
	get := func(ws string) *Lag {
		if by[ws] == nil {
			by[ws] = &Lag{WS: ws, Head: j.Head()}
		}
		return by[ws]
	}
	err = j.DB().View(func(txn *badger.Txn) error {
		p := loc.key(remoteShipped)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			get(string(it.Item().Key()[len(p):]))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for ws := range by {
		s, err := loc.shipped(ws)
		if err != nil {
			return nil, err
		}
		by[ws].Shipped = s.Seq
	}
	fetched, err := FetchedWorkspaces(ctx, j, b)
	if err != nil {
		return nil, err
	}
	for ws, seq := range fetched {
		get(ws).Fetched = seq
	}
	var out []Lag
	for _, ws := range slices.Sorted(maps.Keys(by)) {
		l := by[ws]
		from := max(l.Shipped, l.Fetched) + 1
		errStop := errors.New("stop")
		err := j.Iter(from, func(r *journal.Record) error {
			if r.Seq > l.Head {
				return errStop
			}
			l.Records++
			l.RecordBytes += int64(r.EncodedLen())
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			return nil, err
		}
		out = append(out, *l)
	}
	return out, nil
}
