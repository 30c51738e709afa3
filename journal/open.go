package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"
)

// Options configure Open. The zero value is valid: no logging, no faults.
type Options struct {
	// Logger receives Badger's warnings and errors and the journal's own.
	Logger zerolog.Logger
	// Fault, when set, is called at each named operation ("commit",
	// "sync") before it runs; a non-nil result makes that operation fail
	// with it. For fault-injection tests only.
	Fault func(op string) error
}

// maxBatchBytes bounds what one commit carries; Enqueue waits while the
// queued batch is larger (memory backpressure, see doc.go).
const maxBatchBytes = 32 << 20

// badgerOptions tunes Badger for one workspace store: small memory (the
// daemon stays under 300 MiB RSS), file chunks in the value log, no sync per
// write (the journal syncs explicitly, see doc.go).
func badgerOptions(dir string, log zerolog.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(badgerLogger{log.With().Str("component", "badger").Logger()}).
		WithLoggingLevel(badger.WARNING).
		WithSyncWrites(false).
		WithValueThreshold(1 << 10).
		WithMemTableSize(32 << 20).
		WithNumMemtables(3).
		WithBlockCacheSize(32 << 20).
		WithIndexCacheSize(16 << 20).
		WithNumCompactors(2).
		WithValueLogFileSize(128 << 20).
		WithDetectConflicts(false).
		WithMetricsEnabled(false)
}

// Open opens (or creates) the workspace store in dir and starts the
// committer. It fails with ErrLocked if another process has the store open,
// ErrFormat if the store has another format version and ErrCorrupt if dir
// is not a reynfs store or is damaged.
func Open(dir string, opts Options) (*Journal, error) {
	if err := checkDir(dir); err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if err := checkFormatReadOnly(dir, opts.Logger); err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	db, err := badger.Open(badgerOptions(dir, opts.Logger))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, classifyOpenError(err))
	}
	next, err := initStore(db)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	return start(db, next, opts), nil
}

// checkFormat refuses a stored format version other than storeFormat.
func checkFormat(v []byte) error {
	f, err := parseFormat(v)
	if err != nil {
		return err
	}
	if f != storeFormat {
		return fmt.Errorf("%w: store format version %d, this reynfs reads %d", ErrFormat, f, storeFormat)
	}
	return nil
}

// checkFormatReadOnly refuses a store of another format version before it
// is opened for writing (which adds files to it). A store that cannot be
// opened read-only (one a crash left unclosed, a locked one) is checked by
// the writable open instead.
func checkFormatReadOnly(dir string, log zerolog.Logger) error {
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
		return nil // a new store
	}
	db, err := badger.Open(badgerOptions(dir, log).WithReadOnly(true).WithLoggingLevel(badger.ERROR))
	if err != nil {
		return nil
	}
	defer db.Close()
	return db.View(func(txn *badger.Txn) error {
		v, err := getValue(txn, keyFormat)
		if err != nil || v == nil {
			return err
		}
		return checkFormat(v)
	})
}

// checkDir creates dir if it is missing and refuses a directory that holds
// files but no Badger manifest: Badger would otherwise make a store among
// someone else's files.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: not a directory", ErrCorrupt)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	manifest, other := false, ""
	for _, e := range ents {
		switch e.Name() {
		case "MANIFEST":
			manifest = true
		case "LOCK":
		default:
			other = e.Name()
		}
	}
	if !manifest && other != "" {
		return fmt.Errorf("%w: holds %s but no Badger MANIFEST: not a reynfs store", ErrCorrupt, other)
	}
	return nil
}

// classifyOpenError maps a badger.Open failure to our sentinels. Badger
// formats its errors with %v, so only the text is left to inspect.
func classifyOpenError(err error) error {
	msg := oneLine(err.Error())
	switch {
	case strings.Contains(msg, "Another process is using this Badger database"):
		return fmt.Errorf("%w (%s)", ErrLocked, msg)
	case errors.Is(err, os.ErrPermission) || strings.Contains(msg, "permission denied"):
		return errors.New(msg)
	default:
		return fmt.Errorf("%w: %s", ErrCorrupt, msg)
	}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// initStore checks or writes the format version and returns the next seq:
// one past the highest seq ever committed ("m/seq" survives truncation of
// the records themselves, the last 'j' key covers a store written before a
// crash lost nothing but is cheap to check).
func initStore(db *badger.DB) (uint64, error) {
	next := uint64(1)
	err := db.Update(func(txn *badger.Txn) error {
		v, err := getValue(txn, keyFormat)
		if err != nil {
			return err
		}
		if v == nil {
			if empty, err := isEmpty(txn); err != nil {
				return err
			} else if !empty {
				return fmt.Errorf("%w: no %s key: not a reynfs store", ErrCorrupt, keyFormat)
			}
			return txn.Set(keyFormat, formatBytes(storeFormat))
		}
		if err := checkFormat(v); err != nil {
			return err
		}
		high, err := highestSeq(txn)
		next = high + 1
		return err
	})
	if err != nil {
		return 0, err
	}
	if err := db.Sync(); err != nil {
		return 0, fmt.Errorf("sync: %w", err)
	}
	return next, nil
}

func highestSeq(txn *badger.Txn) (uint64, error) {
	var high uint64
	v, err := getValue(txn, keySeq)
	if err != nil {
		return 0, err
	}
	if v != nil {
		if high, err = parseUint64(v); err != nil {
			return 0, fmt.Errorf("%s: %w", keySeq, err)
		}
	}
	last, err := lastSeq(txn, prefixRecord)
	return max(high, last), err
}

// lastSeq returns the highest seq under a seq-keyed prefix, 0 if none.
func lastSeq(txn *badger.Txn, prefix byte) (uint64, error) {
	it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte{prefix}})
	defer it.Close()
	it.Seek(seqKey(prefix, ^uint64(0)))
	if !it.Valid() {
		return 0, nil
	}
	return keySeqOf(it.Item().Key())
}

func isEmpty(txn *badger.Txn) (bool, error) {
	it := txn.NewIterator(badger.IteratorOptions{})
	defer it.Close()
	it.Rewind()
	return !it.Valid(), nil
}

// getValue returns a copy of key's value, or nil if the key is absent.
func getValue(txn *badger.Txn, key []byte) ([]byte, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

// badgerLogger adapts zerolog to Badger's logger: warnings and errors only.
type badgerLogger struct{ log zerolog.Logger }

func (l badgerLogger) Errorf(f string, args ...any) {
	l.log.Error().Msg(strings.TrimSpace(fmt.Sprintf(f, args...)))
}

func (l badgerLogger) Warningf(f string, args ...any) {
	l.log.Warn().Msg(strings.TrimSpace(fmt.Sprintf(f, args...)))
}

func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}
