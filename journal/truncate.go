package journal

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// keyFloor holds the first retained seq (8-byte big-endian); absent: 1.
var keyFloor = []byte("m/floor")

// Floor returns the first retained seq: records below it were dropped by
// Truncate (1 when none were). Reset records are never dropped.
func (j *Journal) Floor() (uint64, error) {
	var floor uint64 = 1
	err := j.view(func(txn *badger.Txn) error {
		v, err := reader{txn, j.tail}.get(keyFloor)
		if err != nil || v == nil {
			return err
		}
		floor, err = parseUint64(v)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	return floor, nil
}

// Truncate drops the records below floor, except reset records (they
// define the active path of what is retained, and are small). The floor is
// recorded first, so a crash midway leaves the records below it refused,
// never half-used. Objects the dropped records named are the caller's to
// collect. It returns how many records went. Call it on a journal nobody
// appends to (an unmounted store).
func (j *Journal) Truncate(floor uint64) (int, error) {
	cur, err := j.Floor()
	if err != nil {
		return 0, err
	}
	if floor <= cur {
		return 0, nil
	}
	if floor > j.Head()+1 {
		return 0, fmt.Errorf("truncate below %d: past head %d", floor, j.Head())
	}
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if j.closed {
		return 0, ErrClosed
	}
	if err := j.db.Update(func(txn *badger.Txn) error { return txn.Set(keyFloor, uint64Bytes(floor)) }); err != nil {
		return 0, fmt.Errorf("truncate: %w", err)
	}
	var keys [][]byte
	err = j.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixRecord}})
		defer it.Close()
		for it.Seek(seqKey(prefixRecord, cur)); it.Valid(); it.Next() {
			seq, err := keySeqOf(it.Item().Key())
			if err != nil {
				return err
			}
			if seq >= floor {
				break
			}
			if _, err := txn.Get(seqKey(prefixReset, seq)); err == nil {
				continue // a reset record stays
			}
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("truncate: %w", err)
	}
	wb := j.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return 0, fmt.Errorf("truncate: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return 0, fmt.Errorf("truncate: %w", err)
	}
	if err := j.db.Sync(); err != nil {
		return 0, fmt.Errorf("truncate: %w", err)
	}
	return len(keys), nil
}
