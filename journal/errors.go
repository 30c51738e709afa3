package journal

import (
	"errors"
	"fmt"
	"syscall"
)

// Sentinel errors. Every error the package returns wraps at most one of them
// (plus the cause), so callers test with errors.Is.
var (
	// ErrFormat: the store was written by a reynfs with another store
	// format version.
	ErrFormat = errors.New("unsupported store format")
	// ErrCorrupt: the directory is not a reynfs store, or the store or a
	// record in it is damaged.
	ErrCorrupt = errors.New("store corrupt")
	// ErrLocked: another process has the store open.
	ErrLocked = errors.New("store in use by another process")
	// ErrFailed: an earlier commit or sync failed; the journal accepts
	// nothing more until it is reopened. The file system answers EIO.
	ErrFailed = errors.New("journal failed")
	// ErrClosed: the journal was closed.
	ErrClosed = errors.New("journal closed")
	// ErrNotFound: no record has that seq (never written, or truncated).
	ErrNotFound = errors.New("record not found")
	// ErrInvalid: a record or argument breaks the rules of its op; nothing
	// was written and the journal is still usable.
	ErrInvalid = errors.New("invalid record")
	// ErrTooLarge: a record is larger than MaxRecordSize. It wraps
	// ErrInvalid (nothing was written, the journal is still usable); the
	// file system answers EFBIG.
	ErrTooLarge = fmt.Errorf("%w: too large", ErrInvalid)
	// ErrNoSpace: the store's file system has too little free space for
	// the write (see space.go); nothing was written, the journal is still
	// usable, and writes are taken again once space comes back. It wraps
	// syscall.ENOSPC, so the file system answers ENOSPC.
	ErrNoSpace = fmt.Errorf("store file system full: %w", syscall.ENOSPC)
)
