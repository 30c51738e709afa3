package cas

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Indexed reports whether a writable open of the store would find h: in
// the index, or in the log past the index's end (which catch-up indexes),
// and for a delta its bases too. It differs from Has only on a salvage
// open (fsck), whose tail also holds every object of the log's indexed
// part: one the index no longer names there (swept by the collector, or
// lost with a damaged table) is found by Has and Get, so salvage can still
// read it, but a mount would not find it. fsck reports an object a
// retained tree needs that is not Indexed.
func (b *Badger) Indexed(h Hash) (bool, error) {
	for range MaxChain + 2 {
		loc, found, err := b.indexedLoc(h)
		if err != nil || !found {
			return false, err
		}
		if loc.Comp != compDelta {
			return true, nil
		}
		h = loc.Base
	}
	return false, fmt.Errorf("indexed %s: %w: a delta chain longer than %d", h.Short(), ErrCorrupt, MaxChain)
}

// indexedLoc finds h as a writable open would: past the index's end in
// the tail, else in the index (a format-1 object inline has no Loc).
func (b *Badger) indexedLoc(h Hash) (Loc, bool, error) {
	if loc, ok := b.tail[h]; ok && (b.salvaged == nil || !posLess(Pos{loc.Seg, loc.Off}, *b.salvaged)) {
		return loc, true, nil
	}
	if b.hidden[h] {
		return Loc{}, false, nil
	}
	var loc Loc
	found := false
	err := b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(logKey(h))
		if err == nil {
			v, err := item.ValueCopy(nil)
			if err == nil {
				loc, err = decodeLoc(v)
			}
			found = err == nil
			return err
		}
		if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		if _, err = txn.Get(Key(h)); err == nil {
			found = true
		}
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		err = nil
	}
	return loc, found, err
}
