package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// view runs fn in a read transaction unless the journal is closed.
func (j *Journal) view(fn func(txn *badger.Txn) error) error {
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if j.closed {
		return ErrClosed
	}
	return j.db.View(fn)
}

// Get returns the committed record with that seq, or an error wrapping
// ErrNotFound (never written, not yet committed, or truncated).
func (j *Journal) Get(seq uint64) (*Record, error) {
	var r *Record
	err := j.view(func(txn *badger.Txn) error {
		if v, ok := j.tail[string(seqKey(prefixRecord, seq))]; ok {
			if v == nil {
				return ErrNotFound
			}
			var err error
			r, err = decodeAt(seq, v)
			return err
		}
		item, err := txn.Get(seqKey(prefixRecord, seq))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			r, err = decodeAt(seq, v)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("get seq %d: %w", seq, err)
	}
	return r, nil
}

// decodeAt decodes the value stored under seq and checks it names seq.
func decodeAt(seq uint64, v []byte) (*Record, error) {
	r, err := Decode(v)
	if err != nil {
		return nil, err
	}
	if r.Seq != seq {
		return nil, fmt.Errorf("%w: record under seq %d says seq %d", ErrCorrupt, seq, r.Seq)
	}
	return r, nil
}

// Iter calls fn for each committed record with seq >= from, in seq order,
// and stops at the first error fn returns (returning it). It reads one
// consistent snapshot: records committed during the walk are not seen.
// fn must not call Close.
func (j *Journal) Iter(from uint64, fn func(*Record) error) error {
	if err := j.iterPrefix(prefixRecord, from, fn); err != nil {
		return fmt.Errorf("iter from %d: %w", from, err)
	}
	return nil
}

func (j *Journal) iterPrefix(prefix byte, from uint64, fn func(*Record) error) error {
	extra := j.tailSeqs(prefix, from) // read-only: the log's tail, merged in
	emit := func(seq uint64, v []byte) error {
		r, err := decodeAt(seq, v)
		if err != nil {
			return err
		}
		return fn(r)
	}
	flush := func(below uint64) error {
		for len(extra) > 0 && extra[0] < below {
			if v := j.tail[string(seqKey(prefix, extra[0]))]; v != nil {
				if err := emit(extra[0], v); err != nil {
					return err
				}
			}
			extra = extra[1:]
		}
		return nil
	}
	return j.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefix}, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Seek(seqKey(prefix, from)); it.Valid(); it.Next() {
			item := it.Item()
			seq, err := keySeqOf(item.Key())
			if err != nil {
				return err
			}
			if err := flush(seq); err != nil {
				return err
			}
			if _, over := j.tail[string(item.Key())]; over {
				continue // the tail's newer value (or delete) was emitted
			}
			if err := item.Value(func(v []byte) error { return emit(seq, v) }); err != nil {
				return err
			}
		}
		return flush(^uint64(0))
	})
}

// tailSeqs returns the seqs at or above from that the read-only tail
// holds under prefix, ascending.
func (j *Journal) tailSeqs(prefix byte, from uint64) []uint64 {
	var seqs []uint64
	for k := range j.tail {
		if len(k) == 9 && k[0] == prefix {
			if seq := binary.BigEndian.Uint64([]byte(k[1:])); seq >= from {
				seqs = append(seqs, seq)
			}
		}
	}
	slices.Sort(seqs)
	return seqs
}

// Resets returns every committed reset record in seq order, from the 'r'
// index (it does not scan the journal).
func (j *Journal) Resets() ([]*Record, error) {
	var rs []*Record
	err := j.iterPrefix(prefixReset, 0, func(r *Record) error {
		if r.Op != OpReset {
			return fmt.Errorf("%w: reset index holds a %s record at seq %d", ErrCorrupt, r.Op, r.Seq)
		}
		rs = append(rs, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("resets: %w", err)
	}
	return rs, nil
}

// ResetCount is len(Resets()) without reading them: every control reply
// carries it (the head's epoch). Reset records are never dropped (not by
// Truncate either), so after one count of the index the committer only
// adds to it.
func (j *Journal) ResetCount() (int, error) {
	j.resetMu.Lock()
	defer j.resetMu.Unlock()
	if j.resetKnown {
		return j.resetCount, nil
	}
	n := 0
	err := j.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixReset}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if _, over := j.tail[string(it.Item().Key())]; !over {
				n++
			}
		}
		for _, seq := range j.tailSeqs(prefixReset, 0) {
			if j.tail[string(seqKey(prefixReset, seq))] != nil {
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("resets: %w", err)
	}
	j.resetKnown, j.resetCount = true, n
	return n, nil
}

// Path returns the active-path resolver over every committed reset record.
func (j *Journal) Path() (*Path, error) {
	rs, err := j.Resets()
	if err != nil {
		return nil, err
	}
	return NewPath(rs)
}

// GetMeta returns the committed value of a bookkeeping key, or nil, nil if
// it is absent.
func (j *Journal) GetMeta(key string) ([]byte, error) {
	k, err := metaKey(key)
	if err != nil {
		return nil, fmt.Errorf("get meta: %w", err)
	}
	var v []byte
	err = j.view(func(txn *badger.Txn) error {
		v, err = reader{txn, j.tail}.get(k)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get meta %s: %w", key, err)
	}
	return v, nil
}

// SetMeta stores a bookkeeping value (nil or empty deletes the key). It is
// committed through the committer, so it is ordered after every record
// enqueued before it, then synced.
func (j *Journal) SetMeta(key string, val []byte) error {
	k, err := metaKey(key)
	if err != nil {
		return fmt.Errorf("set meta: %w", err)
	}
	if len(val) == 0 {
		val = nil
	} else {
		val = append([]byte(nil), val...)
	}
	j.mu.Lock()
	if err := j.admitLocked(); err != nil {
		j.mu.Unlock()
		return fmt.Errorf("set meta %s: %w", key, err)
	}
	b := j.addLocked(item{key: k, val: val}, true)
	j.mu.Unlock()
	p := Pending{b: b, j: j}
	if err := p.Wait(); err != nil {
		return fmt.Errorf("set meta %s: %w", key, err)
	}
	if err := j.Sync(); err != nil {
		return fmt.Errorf("set meta %s: %w", key, err)
	}
	return nil
}
