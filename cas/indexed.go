package cas

import (
	"errors"

	"github.com/dgraph-io/badger/v4"
)

// Indexed reports whether a writable open of the store would find h: in
// the index, or in the log past the index's end (which catch-up indexes).
// It differs from Has only on a salvage open (fsck), whose tail also
// holds every object of the log's indexed part: one the index no longer
// names there (swept by the collector, or lost with a damaged table) is
// found by Has and Get, so salvage can still read it, but a mount would
// not find it. fsck reports an object a retained tree needs that is not
// Indexed.
func (b *Badger) Indexed(h Hash) (bool, error) {
	loc, inTail := b.tail[h]
	if !inTail {
		return b.Has(h)
	}
	if b.salvaged == nil || !posLess(Pos{loc.Seg, loc.Off}, *b.salvaged) {
		return true, nil
	}
	err := b.db.View(func(txn *badger.Txn) error {
		if _, err := txn.Get(logKey(h)); !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		_, err := txn.Get(Key(h)) // format 1: the object inline
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}
