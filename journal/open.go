package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
)

// Options configure Open. The zero value is valid: no logging, no faults.
type Options struct {
	// Logger receives Badger's warnings and errors and the journal's own.
	Logger zerolog.Logger
	// Fault, when set, is called at each named operation ("commit",
	// "index": between a commit's frame and its index write, "sync")
	// before it runs; a non-nil result makes that operation fail
	// with it. For fault-injection tests only.
	Fault func(op string) error
	// ReadOnly opens an existing store for reading only: nothing in its
	// directory is created, changed or removed (look-only commands);
	// Enqueue and SetMeta fail with ErrReadOnly.
	ReadOnly bool
	// Damaged, with ReadOnly, opens a store that Open would refuse as
	// damaged, for fsck and salvage; Damage lists what was found.
	Damaged bool
	// repairLogs (Repair) opens a store whose only damage is in Badger's
	// logs, which Repair has copied: Badger truncates them where its
	// replay stops and the index catches up from the segment log.
	repairLogs bool
}

// maxBatchBytes bounds what one commit carries; Enqueue waits while the
// queued batch is larger (memory backpressure, see doc.go).
const maxBatchBytes = 32 << 20

// badgerOptions tunes Badger for one workspace store: small memory (the
// daemon stays under 200 MiB RSS at 100k files), no sync per write (the
// journal syncs explicitly, see doc.go). File chunks live in the segment
// log, so Badger holds an index and records: 8 MiB memtables (each one's
// skiplist arena is allocated whole, about 1.3x its size, and its WAL is
// mapped at twice it) cost a quarter of the 32 MiB ones sized for chunk
// values, and every write goes through WriteBatch, which splits what
// exceeds a smaller memtable's batch limit.
func badgerOptions(dir string, log zerolog.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(badgerLogger{log.With().Str("component", "badger").Logger()}).
		WithLoggingLevel(badger.WARNING).
		WithSyncWrites(false).
		WithValueThreshold(1 << 10).
		WithMemTableSize(8 << 20).
		WithNumMemtables(3).
		WithBlockCacheSize(32 << 20).
		WithIndexCacheSize(16 << 20).
		WithNumCompactors(2).
		WithValueLogFileSize(128 << 20).
		WithDetectConflicts(false).
		WithMetricsEnabled(false).
		// The tables hold the object index: 23k random 32-byte names
		// and their locations in the benchmark's store (docs/storage.md,
		// format 3). zstd takes its table 1.40 to 1.27 MB where Snappy
		// finds little, 16 KiB blocks to 1.20 MB; a block is
		// decompressed once, as it enters the block cache. Each table
		// records its own compression, so tables written before read as
		// they are and older binaries read these.
		WithCompression(options.ZSTD).
		WithBlockSize(16 << 10).
		// A damaged table block is an error, not garbage keys (or a
		// panic in whatever goroutine decodes them); blocks are checked
		// once, when they enter the block cache.
		WithChecksumVerificationMode(options.OnBlockRead)
}

// ErrReadOnly: the journal was opened read-only and refuses writes.
var ErrReadOnly = errors.New("store opened read-only")

// Open opens (or creates) the workspace store in dir and starts the
// committer. It fails with ErrLocked if another process has the store open,
// ErrFormat if the store has another format version and ErrCorrupt if dir
// is not a reynfs store, is damaged, or holds less than its manifest says
// was synced (see doc.go, "Damage"). A damaged store is refused before
// anything in it is written.
func Open(dir string, opts Options) (*Journal, error) {
	j, err := open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	return j, nil
}

func open(dir string, opts Options) (*Journal, error) {
	man, err := readManifest(ManifestPath(dir))
	var pre []string // damage a Damaged open goes past
	if err != nil && opts.ReadOnly && opts.Damaged && errors.Is(err, ErrCorrupt) {
		pre, man = append(pre, oneLine(err.Error())), nil
	} else if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil && man != nil && man.Durable > 0 {
		// Badger's files are gone: refuse before creating anything.
		what := "holds no Badger store"
		if err := checkContents(dir); err != nil && errors.Is(err, ErrCorrupt) {
			what = strings.TrimPrefix(err.Error(), ErrCorrupt.Error()+": ")
		}
		return nil, fmt.Errorf("%w: store lost acknowledged history: manifest %s says durable through seq %d%s, but %s %s",
			ErrCorrupt, ManifestPath(dir), man.Durable, genNote(man), dir, what)
	}
	if opts.ReadOnly {
		if err := checkExisting(dir); err != nil {
			return nil, err
		}
	} else if err := checkDir(dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
		// A new store.
		if opts.ReadOnly {
			return nil, fmt.Errorf("%w: %s holds no Badger store", ErrCorrupt, dir)
		}
		return openWritable(dir, opts, man)
	}
	// An existing store: check it without writing, then open it.
	damage, ro, err := verify(dir, opts, man)
	if err != nil {
		return nil, err
	}
	if opts.ReadOnly {
		ro.damage = append(pre, damage...)
		return ro, nil
	}
	return openWritable(dir, opts, man)
}

// LogPath is the segment log of the store in dir: a sibling directory
// (dir + ".log") holding the segments (see doc.go, "Store").
func LogPath(dir string) string {
	return filepath.Clean(dir) + ".log"
}

// frameKeys are the prefixes of the keys a commit's frame writes
// (commit.go): records, the reset index, "m/seq" and meta keys.
var frameKeys = [][]byte{{prefixRecord}, {prefixReset}, keySeq, []byte(metaPrefix)}

// openLog opens the segment log over db and brings the index up to it
// (read-only: in memory). Damage wraps ErrCorrupt and names the file and
// offset; with keepDamaged a read-only open still returns the store and
// the tail before the damage.
func openLog(db *badger.DB, dir, id string, readOnly, keepDamaged bool, fault func(string) error) (*cas.Badger, *cas.Tail, error) {
	objs, err := cas.OpenLogged(db, LogPath(dir), cas.LogOptions{ID: id, ReadOnly: readOnly, Create: !readOnly, FrameKeys: frameKeys})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: store format %d without its log: %s", ErrCorrupt, storeFormat, oneLine(err.Error()))
	}
	objs.SetFault(fault)
	t, err := objs.CatchUp(keepDamaged)
	if err == nil && t.Damage != nil {
		err = t.Damage
	}
	if err != nil {
		if errors.Is(err, cas.ErrDamaged) {
			err = fmt.Errorf("%w: %s", ErrCorrupt, strings.TrimPrefix(oneLine(err.Error()), cas.ErrDamaged.Error()+": "))
		}
		if !keepDamaged || t == nil {
			_ = objs.CloseLog()
			return nil, nil, err
		}
		return objs, t, err
	}
	return objs, t, nil
}

// openWritable opens Badger writable, upgrades a format-1 store or sets
// up a new one (format version, store id, the log), brings the index up
// to the log and creates the manifest if there is none.
func openWritable(dir string, opts Options, man *Manifest) (*Journal, error) {
	reallocDiscard(dir) // Close dug holes in it (discard.go)
	db, err := openBadger(badgerOptions(dir, opts.Logger))
	if err != nil {
		return nil, err
	}
	format, id, err := initStore(db, man)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	if format != 0 && format != storeFormat {
		opts.Logger.Info().Int("from", format).Int("to", storeFormat).Str("store", dir).Msg("upgrading store format")
	}
	objs, _, err := openLog(db, dir, id, false, false, opts.Fault)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	var next uint64
	err = db.Update(func(txn *badger.Txn) error {
		if format != storeFormat {
			// Only now that the log exists: a store of format 2 or
			// later always has one. From format 2 nothing else changes:
			// deltas (3), blobs without their names (4), packs (5) and
			// frames with synced-through marks (6) are written from now
			// on, and older entries and frames read as they are.
			if err := txn.Set(keyFormat, formatBytes(storeFormat)); err != nil {
				return err
			}
		}
		r := reader{txn: txn}
		high, err := r.highestSeq()
		if err != nil {
			return err
		}
		next = high + 1
		return checkMarks(r, man, high) // the store changed between verify and this open
	})
	if err == nil {
		err = db.Sync()
	}
	if err != nil {
		_ = objs.CloseLog()
		_ = db.Close()
		return nil, err
	}
	if man == nil {
		man = &Manifest{Format: storeFormat, ID: id, Durable: next - 1}
		if err := writeManifest(ManifestPath(dir), man); err != nil {
			_ = objs.CloseLog()
			_ = db.Close()
			return nil, err
		}
	}
	man.Format = storeFormat
	j := start(db, objs, next, opts)
	j.marks = newMarks(ManifestPath(dir), *man, opts.Logger)
	return j, nil
}

// openBadger opens Badger and turns a panic in the opening goroutine into
// ErrCorrupt (checkTables catches the ones Badger's own goroutines raise).
func openBadger(o badger.Options) (db *badger.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%w: Badger failed opening the store: %s", ErrCorrupt, oneLine(fmt.Sprint(r)))
		}
	}()
	db, err = badger.Open(o)
	if err != nil {
		return nil, classifyOpenError(err)
	}
	return db, nil
}

// checkFormat returns the stored format version and refuses one this
// reynfs does not read: storeFormat, format 1 (objects inline in Badger,
// no log), format 2 (no deltas), format 3 (names in the log), format 4
// (no packs) and format 5 (frames without marks), which a writable open
// upgrades.
func checkFormat(v []byte) (int, error) {
	f, err := parseFormat(v)
	if err != nil {
		return 0, err
	}
	if f < 1 || f > storeFormat {
		return 0, fmt.Errorf("%w: store format version %d, this reynfs reads %d and upgrades 1 to %d", ErrFormat, f, storeFormat, storeFormat-1)
	}
	return f, nil
}

// checkExisting refuses a directory that holds no Badger store, without
// creating anything (read-only opens).
func checkExisting(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: not a directory", ErrCorrupt)
	}
	return nil
}

// checkDir creates dir if it is missing and refuses a directory that holds
// files but no Badger manifest: Badger would otherwise make a store among
// someone else's files.
func checkDir(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o700)
	}
	return checkContents(dir)
}

// checkContents is checkDir without creating anything.
func checkContents(dir string) error {
	fi, err := os.Stat(dir)
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

// initStore checks the format version (0 for a new store) and returns
// the store id, writing one if the store has none yet (the manifest's,
// for a store written before ids existed). The format version itself is
// written by openWritable once the log exists.
func initStore(db *badger.DB, man *Manifest) (int, string, error) {
	var format int
	var id string
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
		} else if format, err = checkFormat(v); err != nil {
			return err
		}
		b, err := getValue(txn, keyID)
		if err != nil || b != nil {
			id = string(b)
			return err
		}
		if man != nil {
			id = man.ID
		} else if id, err = newStoreID(); err != nil {
			return err
		}
		return txn.Set(keyID, []byte(id))
	})
	if err != nil {
		return 0, "", err
	}
	if err := db.Sync(); err != nil {
		return 0, "", fmt.Errorf("sync: %w", err)
	}
	return format, id, nil
}

// reader reads Badger through the log's tail that a read-only open keeps
// in memory (nil tail: Badger alone).
type reader struct {
	txn  *badger.Txn
	tail map[string][]byte
}

func (r reader) get(key []byte) ([]byte, error) {
	if v, ok := r.tail[string(key)]; ok {
		return v, nil
	}
	return getValue(r.txn, key)
}

func (r reader) highestSeq() (uint64, error) {
	var high uint64
	v, err := r.get(keySeq)
	if err != nil {
		return 0, err
	}
	if v != nil {
		if high, err = parseUint64(v); err != nil {
			return 0, fmt.Errorf("%s: %w", keySeq, err)
		}
	}
	last, err := lastSeqTail(r.txn, prefixRecord, r.tail)
	for k := range r.tail {
		if len(k) == 9 && k[0] == prefixRecord && r.tail[k] != nil {
			last = max(last, binary.BigEndian.Uint64([]byte(k[1:])))
		}
	}
	return max(high, last), err
}

// lastSeqTail returns the highest seq under a seq-keyed prefix, 0 if
// none, passing over the keys the tail deletes (a read-only open's
// catch-down of an index ahead of the log).
func lastSeqTail(txn *badger.Txn, prefix byte, tail map[string][]byte) (uint64, error) {
	it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte{prefix}})
	defer it.Close()
	for it.Seek(seqKey(prefix, ^uint64(0))); it.Valid(); it.Next() {
		k := it.Item().Key()
		if v, ok := tail[string(k)]; ok && v == nil {
			continue
		}
		return keySeqOf(k)
	}
	return 0, nil
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
