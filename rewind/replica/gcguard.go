package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/objstore"
)

// What a push learns of remote GC at its start (the package doc, "Remote
// GC", the two push guards).

// gcGuard: the objects of the packs pending condemned lists name, which
// a push must not count as held (it sends them again, in new packs).
type gcGuard struct {
	condemned map[cas.Hash]bool
	// pending: some list is pending, so a tree the store holds whole
	// may have a condemned subtree (its root in a pack kept for another
	// object): the push walks every tree it sends, skipping none.
	pending bool
}

// skip reports whether a push must not count h as held with want.
func (g *gcGuard) skip(h cas.Hash, want byte) bool {
	return g.condemned[h] || g.pending && want == holdsTree
}

// readGCGuard lists gc/ and reads the condemned lists first, then
// gc/state (when the listing has it: a remote never collected costs a
// push one List): a run that deleted a list's packs bumped gc/state
// before, so a push that finds no list (it was deleted) finds the new
// generation. When the generation
// differs from the one this store last saw for the remote, the store's
// record of what the remote holds is dropped and made again from the
// index files (less the condemned packs'): packs were deleted since.
func readGCGuard(ctx context.Context, b objstore.Backend, loc local) (gcGuard, error) {
	g := gcGuard{condemned: map[cas.Hash]bool{}}
	lists, state, err := readGCListing(ctx, b)
	if err != nil {
		return g, err
	}
	ids := map[string]bool{}
	for _, l := range lists {
		g.pending = true
		for _, id := range l.c.Packs {
			ids[id] = true
		}
	}
	for id := range ids {
		x, err := readIndex(ctx, b, id)
		if err != nil {
			return g, err
		}
		if x != nil {
			for _, e := range x.Entries {
				g.condemned[e.Hash] = true
			}
		}
	}
	var gen uint64
	if state {
		// Read after the listing: a run that deleted a listed list's
		// packs bumped gc/state before it deleted the list.
		if gen, _, err = readGCState(ctx, b); err != nil {
			return g, err
		}
	}
	if mine, err := loc.gcGen(); err != nil || mine == gen {
		return g, err
	}
	if err := loc.rebuildHeld(ctx, b, ids); err != nil {
		return g, err
	}
	return g, loc.setGCGen(gen)
}

// readIndex reads packs/<id>.idx (nil: there is none).
func readIndex(ctx context.Context, b objstore.Backend, id string) (*Index, error) {
	data, _, err := b.Get(ctx, IndexKey(id))
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return DecodeIndex(IndexKey(id), data)
}

// gcGen returns the gc generation this store last saw (0: none).
func (l local) gcGen() (uint64, error) {
	var gen uint64
	err := l.j.DB().View(func(txn *badger.Txn) error {
		it, err := txn.Get(l.key(remoteGCGen))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error {
			if len(v) == 8 {
				gen = binary.BigEndian.Uint64(v)
			}
			return nil
		})
	})
	return gen, err
}

func (l local) setGCGen(gen uint64) error {
	v := binary.BigEndian.AppendUint64(nil, gen)
	return l.j.DB().Update(func(txn *badger.Txn) error { return txn.Set(l.key(remoteGCGen), v) })
}

// rebuildHeld drops every object recorded as held and records those the
// index files name, but for the packs in skip.
func (l local) rebuildHeld(ctx context.Context, b objstore.Backend, skip map[string]bool) error {
	var keys [][]byte
	err := l.j.DB().View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: l.key(remoteHolds)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if err != nil {
		return err
	}
	wb := l.j.DB().NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	var ids []string
	packs := map[string]bool{}
	err = b.List(ctx, "packs/", func(i objstore.Info) error {
		name := strings.TrimPrefix(i.Key, "packs/")
		if id, ok := strings.CutSuffix(name, ".idx"); ok && !skip[id] {
			ids = append(ids, id)
		} else if id, ok := strings.CutSuffix(name, ".pack"); ok {
			packs[id] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	held := map[cas.Hash]byte{}
	for _, id := range ids {
		if !packs[id] {
			continue // an index without its pack: nothing to count on
		}
		x, err := readIndex(ctx, b, id)
		if err != nil {
			return err
		}
		if x == nil {
			continue
		}
		for _, e := range x.Entries {
			held[e.Hash] = holdsData
		}
	}
	return l.markHeld(held)
}
