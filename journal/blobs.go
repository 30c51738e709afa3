package journal

import (
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
)

// objectWriter adds blobs to a commit's WriteBatch under 'o' + hash, the
// key layout cas owns, skipping those already stored. One read transaction
// serves the whole batch.
type objectWriter struct{ txn *badger.Txn }

func (j *Journal) objectWriter() objectWriter {
	return objectWriter{txn: j.db.NewTransaction(false)}
}

func (w objectWriter) close() { w.txn.Discard() }

// AddToBatch queues b unless it is stored; written reports whether it was
// queued.
func (w objectWriter) AddToBatch(wb *badger.WriteBatch, b cas.Blob) (written bool, err error) {
	key := make([]byte, 1+len(b.Hash))
	key[0] = prefixObject
	copy(key[1:], b.Hash[:])
	_, err = w.txn.Get(key)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, badger.ErrKeyNotFound):
		return false, err
	}
	if err := wb.Set(key, b.Data); err != nil {
		return false, err
	}
	return true, nil
}
