package daemon

import (
	"fmt"
	"strconv"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// Adopt records in the unmounted store j that the project directory dir
// holds the tree root, written there by an export that started at since
// (Unix ns), as a first mount's import or a write-back leaves the
// bookkeeping: a clone (reynfs clone) then mounts without taking its own
// export for changes made while unmounted. The inode ceiling goes above
// every inode number the store's records name, so a new inode never
// takes a number the history used.
func Adopt(j *journal.Journal, dir string, root cas.Hash, since int64) error {
	var ceil uint64
	err := j.Iter(1, func(r *journal.Record) error {
		ceil = max(ceil, r.Ino, r.NextIno)
		return nil
	})
	if err != nil {
		return fmt.Errorf("adopt %s: %w", dir, err)
	}
	for _, kv := range [][2]string{
		{metaDir, dir}, {metaDirBase, root.String()},
		{metaInoCeil, strconv.FormatUint(ceil, 10)}, {metaDirSince, strconv.FormatInt(since, 10)},
	} {
		if err := j.SetMeta(kv[0], []byte(kv[1])); err != nil {
			return fmt.Errorf("adopt %s: %w", dir, err)
		}
	}
	return nil
}

// ReserveInodes raises the unmounted store j's inode ceiling above every
// inode number its records name (records a fetch brought from a remote
// name numbers the store never handed out), so that the next mount
// never gives a new inode a number the history used.
func ReserveInodes(j *journal.Journal) error {
	var ceil uint64
	err := j.Iter(1, func(r *journal.Record) error {
		ceil = max(ceil, r.Ino, r.NextIno)
		return nil
	})
	if err != nil {
		return fmt.Errorf("reserve inodes: %w", err)
	}
	if b, err := j.GetMeta(metaInoCeil); err == nil && len(b) > 0 {
		if old, err := strconv.ParseUint(string(b), 10, 64); err == nil && old >= ceil {
			return nil
		}
	}
	if err := j.SetMeta(metaInoCeil, []byte(strconv.FormatUint(ceil, 10))); err != nil {
		return fmt.Errorf("reserve inodes: %w", err)
	}
	return nil
}
