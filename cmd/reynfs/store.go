package main

import (
	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// lookOnly are the requests that only read a store: on an unmounted store
// they open it read-only and never write a byte of it (a damaged store
// stays as it was for fsck and salvage). mount, rewind, gc and agent save
// open it writable.
var lookOnly = map[string]bool{
	"log": true, "diff": true, "show": true, "export": true, "store-status": true,
	"agent-list": true, "agent-show": true,
}

// openOffline opens the store of an unmounted workspace: read-only for a
// look-only request, else writable (and re-indexes the generations a
// crash left unindexed, which a read-only open cannot do).
func openOffline(store string, readOnly bool) (*journal.Journal, error) {
	j, err := journal.Open(daemon.DBPath(store), journal.Options{Logger: zerolog.Nop(), ReadOnly: readOnly})
	if err != nil {
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
