package main

import (
	"errors"
	"syscall"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// Exit codes, one table for every command (documented in the root help).
const (
	exitOK          = 0
	exitFailure     = 1   // the operation failed
	exitUsage       = 2   // bad input: arguments, paths, overlapping store or mount
	exitLocked      = 3   // the store is in use by another daemon
	exitStore       = 4   // the store is corrupt or of another format version
	exitNoDaemon    = 5   // no daemon serves the store
	exitStale       = 6   // a mount of the store is left whose daemon is dead
	exitInterrupted = 130 // SIGINT (Ctrl-C): 128 + 2, as shells report it
	exitInternal    = 70  // a bug: reynfs panicked (the trace is in the file the message names)
	exitTerminated  = 143 // SIGTERM: 128 + 15
)

const exitCodeHelp = `Exit codes: 0 ok, 1 failure, 2 bad input, 3 store locked by another daemon,
4 store corrupt or of another format version, 5 no daemon running for the store,
6 daemon dead and its mount stale ('reynfs unmount' cleans it), 70 internal error
(a bug; the message names the file holding the trace), 130 interrupted
(SIGINT, Ctrl-C), 143 terminated (SIGTERM). A command interrupted cleans up first:
an interrupted mount leaves nothing mounted and the project directory as it was.`

func exitCode(err error) int {
	var coded *codedError
	var intr *interruptedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &intr):
		if intr.sig == syscall.SIGTERM {
			return exitTerminated
		}
		return exitInterrupted
	case errors.As(err, &coded):
		return coded.code
	case errors.Is(err, daemon.ErrUsage), errors.Is(err, errUsage), errors.Is(err, rewind.ErrTarget):
		return exitUsage
	case errors.Is(err, journal.ErrLocked):
		return exitLocked
	case errors.Is(err, journal.ErrCorrupt), errors.Is(err, journal.ErrFormat), errors.Is(err, cas.ErrCorrupt):
		return exitStore
	case errors.Is(err, daemon.ErrStale):
		return exitStale
	case errors.Is(err, daemon.ErrNotRunning):
		return exitNoDaemon
	}
	var ae *api.Error // a kind without a sentinel (runs_active, internal)
	if errors.As(err, &ae) && ae.Data.Exit != 0 {
		return ae.Data.Exit
	}
	return exitFailure
}
