package main

import (
	"errors"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// Exit codes, one table for every command (documented in the root help).
const (
	exitOK       = 0
	exitFailure  = 1  // the operation failed
	exitUsage    = 2  // bad input: arguments, paths, overlapping store or mount
	exitLocked   = 3  // the store is in use by another daemon
	exitStore    = 4  // the store is corrupt or of another format version
	exitNoDaemon = 5  // no daemon serves the store
	exitInternal = 70 // a bug: reynfs panicked (the trace is in the file the message names)
)

const exitCodeHelp = `Exit codes: 0 ok, 1 failure, 2 bad input, 3 store locked by another daemon,
4 store corrupt or of another format version, 5 no daemon running for the store,
70 internal error (a bug; the message names the file holding the trace).`

func exitCode(err error) int {
	var coded *codedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &coded):
		return coded.code
	case errors.Is(err, daemon.ErrUsage), errors.Is(err, errUsage), errors.Is(err, rewind.ErrTarget):
		return exitUsage
	case errors.Is(err, journal.ErrLocked):
		return exitLocked
	case errors.Is(err, journal.ErrCorrupt), errors.Is(err, journal.ErrFormat), errors.Is(err, cas.ErrCorrupt):
		return exitStore
	case errors.Is(err, daemon.ErrNotRunning):
		return exitNoDaemon
	}
	return exitFailure
}
