package rewind

import (
	"fmt"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// CommitImport records a tree read from outside (the first import of the
// project directory, or changes made to it while unmounted) as an import
// record and a generation of kind import, synced. The tree's new inode
// objects go in the same batch as the records that name them. root and
// blobs are what the tree's Root returned (a second Root call returns no
// blobs: they are the objects made since the previous call).
func CommitImport(j *journal.Journal, root cas.Hash, blobs []cas.Blob, nextIno uint64, label string) (*journal.Record, error) {
	now := time.Now().UnixNano()
	im := &journal.Record{Op: journal.OpImport, Time: now, Root: root, NextIno: nextIno, Label: label}
	if err := enqueue(j, im, blobs); err != nil {
		return nil, fmt.Errorf("commit import: %w", err)
	}
	g := &journal.Record{Op: journal.OpGeneration, Time: now, GenKind: KindImport, Label: label, Root: root, NextIno: nextIno}
	if err := enqueue(j, g, nil); err != nil {
		return nil, fmt.Errorf("commit import: %w", err)
	}
	if err := j.Sync(); err != nil {
		return nil, fmt.Errorf("commit import: %w", err)
	}
	return g, indexGeneration(j, g.Seq)
}
