package rewind

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/journal"
)

// The restore index: the op log needs every restore record, and unlike
// resets (the journal's 'r' index) they are not indexed by the journal,
// so a scan of the whole journal would read every record (about 2 s per
// million records). The index is a hint, as the generation index is:
//
//	'p' + seq (8 B, BE)      empty: seq is an OpRestore record
//	meta "rewind/ops-seen"   seq up to which every restore is in 'p' (8 B, BE)
//
// Restore indexes its record once it is durable; Reindex (at open)
// catches up from the mark, which a crash between the two leaves behind
// the unindexed record; and readers scan from the mark to head on top of
// the index, so a read-only open that cannot write sees them all too.
const restorePrefix = 'p'

const metaOpsSeen = "rewind/ops-seen"

func restoreKey(seq uint64) []byte {
	k := make([]byte, 9)
	k[0] = restorePrefix
	binary.BigEndian.PutUint64(k[1:], seq)
	return k
}

func indexRestores(j *journal.Journal, seqs ...uint64) error {
	err := j.DB().Update(func(txn *badger.Txn) error {
		for _, s := range seqs {
			if err := txn.Set(restoreKey(s), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index restores: %w", err)
	}
	return nil
}

// opsSeen is the mark (0: none yet).
func opsSeen(j *journal.Journal) (uint64, error) {
	b, err := j.GetMeta(metaOpsSeen)
	if err != nil || len(b) == 0 {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: meta %s is %d bytes", journal.ErrCorrupt, metaOpsSeen, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// restoreSeqs lists the restore records from floor on, oldest first: the
// indexed ones and those past the mark.
func restoreSeqs(j *journal.Journal, floor uint64) ([]uint64, uint64, error) {
	seen, err := opsSeen(j)
	if err != nil {
		return nil, 0, err
	}
	var seqs []uint64
	err = j.DB().View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte{restorePrefix}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(restoreKey(floor)); it.Valid(); it.Next() {
			if k := it.Item().Key(); len(k) == 9 {
				seqs = append(seqs, binary.BigEndian.Uint64(k[1:]))
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("restore index: %w", err)
	}
	head := j.Head()
	err = j.Iter(max(seen+1, floor, 1), func(r *journal.Record) error {
		if r.Op == journal.OpRestore {
			seqs = append(seqs, r.Seq)
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("restore index: %w", err)
	}
	slices.Sort(seqs)
	return slices.Compact(seqs), head, nil
}

// reindexRestores brings the index up to head (a writable store, at
// open). Only reading the journal can fail it.
func reindexRestores(j *journal.Journal) error {
	seen, err := opsSeen(j)
	if err != nil {
		return err
	}
	if seen >= j.Head() {
		return nil
	}
	seqs, head, err := restoreSeqs(j, seen+1)
	if err != nil {
		return err
	}
	var fresh []uint64
	for _, s := range seqs {
		if s > seen {
			fresh = append(fresh, s)
		}
	}
	// A hint: a store that cannot take it now (a full disk) still
	// mounts, and readers scan from the old mark.
	if indexRestores(j, fresh...) == nil {
		_ = j.SetMeta(metaOpsSeen, binary.BigEndian.AppendUint64(nil, head))
	}
	return nil
}
