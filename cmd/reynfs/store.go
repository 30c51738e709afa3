package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
	"github.com/reynfs/reynfs/rewind/replica"
)

// openOffline opens the store of an unmounted workspace: read-only for a
// look-only request, else writable (and re-indexes the generations a
// crash left unindexed, which a read-only open cannot do).
// A store folder with neither a Badger directory nor a manifest is not a
// store (usage error); one with a manifest alone lost its history, which
// journal.Open reports.
// checkStoreExists refuses, as bad input, a store folder with neither a Badger
// directory nor a manifest: nothing was ever stored there.
func checkStoreExists(dir, store string) error {
	db := daemon.DBPath(store)
	if _, err := os.Stat(db); err != nil {
		if _, merr := os.Lstat(journal.ManifestPath(db)); merr != nil {
			if abs, err := filepath.Abs(dir); err == nil {
				dir = abs // "no reynfs store for /src/app", not "for ."
			}
			return fmt.Errorf("%w: no reynfs store for %s (looked in %s); mount it first", errUsage, dir, store)
		}
	}
	return nil
}

func openOffline(dir, store string, readOnly bool) (*journal.Journal, error) {
	db := daemon.DBPath(store)
	if err := checkStoreExists(dir, store); err != nil {
		return nil, err
	}
	j, err := journal.Open(db, journal.Options{Logger: zerolog.Nop(), ReadOnly: readOnly})
	if err != nil {
		return nil, err
	}
	if err := attachLazy(j, db, readOnly); err != nil {
		_ = j.Close()
		return nil, err
	}
	if readOnly {
		return j, nil
	}
	if err := rewind.Reindex(j); err != nil {
		_ = j.Close()
		return nil, err
	}
	return j, nil
}

// attachLazy makes a lazy clone's store (clone --lazy) fetch the objects
// it lacks from its remote when a command reads them (export, show,
// restore, fsck): replica.OpenLazy, kept with j until the process ends
// (replica.LazyOf finds it). A read-only open does not keep what it
// fetches.
func attachLazy(j *journal.Journal, db string, readOnly bool) error {
	_, err := replica.OpenLazy(context.Background(), j, db, replica.LazyOptions{ReadOnly: readOnly, Log: zerolog.Nop()})
	return err
}
