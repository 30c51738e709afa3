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
// define the active path of what is retained, and are small) and the
// records whose seqs keep lists (retention keeps the generations of its
// coarse window below the fine one). The floor is recorded first, so a
// crash midway leaves the records below it refused, never half-used (the
// scan starts at the first record, so the next call finishes what a crash
// or RaiseFloor left, and a floor below the recorded one means the
// recorded one). Objects the dropped records named
// are the caller's to collect. It returns how many records went. Records
// at or past floor are never touched, so appends may run meanwhile.
func (j *Journal) Truncate(floor uint64, keep ...uint64) (int, error) {
	cur, err := j.Floor()
	if err != nil {
		return 0, err
	}
	if floor < cur {
		floor = cur
	}
	if floor <= 1 {
		return 0, nil
	}
	if floor > j.Head()+1 {
		return 0, fmt.Errorf("truncate below %d: past head %d", floor, j.Head())
	}
	if err := j.RaiseFloor(floor); err != nil {
		return 0, fmt.Errorf("truncate: %w", err)
	}
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if j.closed {
		return 0, ErrClosed
	}
	kept := make(map[uint64]bool, len(keep))
	for _, s := range keep {
		kept[s] = true
	}
	var keys [][]byte
	err = j.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixRecord}})
		defer it.Close()
		for it.Seek(seqKey(prefixRecord, 0)); it.Valid(); it.Next() {
			seq, err := keySeqOf(it.Item().Key())
			if err != nil {
				return err
			}
			if seq >= floor {
				break
			}
			if kept[seq] {
				continue
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

// RaiseFloor records floor as the first retained seq, if it is higher than
// the recorded one, and drops nothing: from now on the states below it are
// refused, and a later Truncate drops their records. A live collector
// raises the floor while it holds the lock rewinds take (fast), and
// truncates after releasing it (slow).
func (j *Journal) RaiseFloor(floor uint64) error {
	cur, err := j.Floor()
	if err != nil {
		return err
	}
	if floor <= cur {
		return nil
	}
	if floor > j.Head()+1 {
		return fmt.Errorf("raise floor to %d: past head %d", floor, j.Head())
	}
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if j.closed {
		return ErrClosed
	}
	if err := j.db.Update(func(txn *badger.Txn) error { return txn.Set(keyFloor, uint64Bytes(floor)) }); err != nil {
		return fmt.Errorf("raise floor: %w", err)
	}
	return nil
}
