package rewind

import (
	"fmt"
	"time"

	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// CommitImport records a tree read from outside (the first import of the
// project directory, or changes made to it while unmounted) as an import
// record and a generation of kind import, synced. The tree's new inode
// objects go in the same batch as the records that name them.
func CommitImport(j *journal.Journal, t *tree.Tree, nextIno uint64, label string) (*journal.Record, error) {
	root, blobs, err := t.Root()
	if err != nil {
		return nil, fmt.Errorf("commit import: %w", err)
	}
	now := time.Now().UnixNano()
	j.Enqueue(&journal.Record{Op: journal.OpImport, Time: now, Root: root, NextIno: nextIno, Label: label}, blobs)
	g := &journal.Record{Op: journal.OpGeneration, Time: now, GenKind: KindImport, Label: label, Root: root, NextIno: nextIno}
	j.Enqueue(g, nil)
	if err := j.Sync(); err != nil {
		return nil, fmt.Errorf("commit import: %w", err)
	}
	return g, indexGeneration(j, g.Seq)
}
