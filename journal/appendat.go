package journal

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
)

// EnqueueAt is Enqueue with the seq given: r gets r.Seq, which must be
// above every seq the journal ever assigned (Head), else the record is
// refused with ErrInvalid and nothing is written. The seqs it skips are
// never assigned afterwards (a seq is never reissued): they stay holes,
// as the records Truncate dropped do, and Get reports them ErrNotFound.
// A clone (rewind/replica) writes a remote's records with it under their
// original seqs, so that every target naming a seq names the same state
// in both stores. Callers serialize their calls with every other append.
func (j *Journal) EnqueueAt(r *Record, blobs []cas.Blob) *Pending {
	if r.Seq == 0 {
		return &Pending{err: fmt.Errorf("append at seq 0: %w: seqs start at 1", ErrInvalid)}
	}
	return j.enqueueAt(r, blobs, true, r.Seq)
}

// StoreID returns the store's random id ("m/id", also in the manifest and
// every segment header): what tells two stores apart, for a remote that
// must know which store wrote a workspace.
func (j *Journal) StoreID() (string, error) {
	var id string
	err := j.view(func(txn *badger.Txn) error {
		v, err := reader{txn, j.tail}.get(keyID)
		id = string(v)
		return err
	})
	if err == nil && id == "" {
		err = fmt.Errorf("%w: no store id", ErrCorrupt)
	}
	if err != nil {
		return "", fmt.Errorf("store id: %w", err)
	}
	return id, nil
}
