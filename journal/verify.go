package journal

// Checks an existing store passes before it is opened writable: Badger's
// logs and tables as Badger would replay them, the format, the log, and
// the journal against the manifest's durable marks (doc.go, "Damage").

import (
	"errors"
	"fmt"
	"os"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
)

// verify checks an existing store without modifying it: the log files a
// writable open would truncate (scanLogs), every table in Badger's
// MANIFEST (checkTables), then a read-only open through a shadow
// directory, the format version and the manifest's durable marks. With
// opts.ReadOnly it returns the read-only journal; with opts.Damaged, a
// damaged store is still opened (read-only) and the damage returned.
func verify(dir string, opts Options, man *Manifest) ([]string, *Journal, error) {
	var damage []string
	note := func(err error) error {
		if opts.Damaged && opts.ReadOnly {
			damage = append(damage, oneLine(err.Error()))
			return nil
		}
		return err
	}
	if _, err := scanLogs(dir); err != nil && !(opts.repairLogs && isLogDamage(err)) {
		if err := note(err); err != nil {
			return nil, nil, err
		}
	}
	if _, err := checkTables(dir, false); err != nil {
		return nil, nil, err // Badger cannot open it at all
	}
	sh, err := newShadow(dir)
	if err != nil && !opts.ReadOnly && !errors.Is(err, ErrLocked) && !errors.Is(err, ErrCorrupt) {
		// No room for the shadow's WAL copies (a full temp directory):
		// the logs and tables are checked, initStore checks the marks.
		opts.Logger.Warn().Err(err).Msg("store pre-check skipped: cannot build its read-only view")
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	db, err := openBadger(badgerOptions(sh.dir, opts.Logger).WithReadOnly(true))
	if err != nil {
		sh.close()
		return nil, nil, fmt.Errorf("read-only open: %w", err)
	}
	var objs *cas.Badger
	fail := func(err error) ([]string, *Journal, error) {
		if objs != nil {
			_ = objs.CloseLog()
		}
		_ = db.Close()
		sh.close()
		return nil, nil, err
	}
	corrupt := func(err error) error {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrFormat) { // Badger could not read what it listed
			err = fmt.Errorf("%w: %s", ErrCorrupt, oneLine(err.Error()))
		}
		if !errors.Is(err, ErrFormat) {
			if _, terr := checkTables(dir, true); terr != nil {
				err = terr // a damaged block hides keys: name the table, not the symptom
			}
		}
		return err
	}
	var format int
	var id []byte
	err = db.View(func(txn *badger.Txn) error {
		v, err := getValue(txn, keyFormat)
		if err != nil {
			return err
		}
		if v == nil {
			return fmt.Errorf("%w: no %s key: not a reynfs store", ErrCorrupt, keyFormat)
		}
		if format, err = checkFormat(v); err != nil {
			return err
		}
		id, err = getValue(txn, keyID)
		return err
	})
	if err != nil {
		if err = corrupt(err); errors.Is(err, ErrFormat) {
			return fail(err)
		}
		if err := note(err); err != nil {
			return fail(err)
		}
	}
	if format == 0 && opts.ReadOnly && opts.Damaged && man != nil {
		if _, err := os.Stat(LogPath(dir)); err == nil {
			// The index cannot say (a damaged table): salvage from the log.
			format = formatLog
		}
	}
	if id == nil && man != nil {
		id = []byte(man.ID)
	}
	var tail map[string][]byte
	var torn string // where the scan cut a torn tail, for a lost-history message
	if format >= formatLog {
		// Read the log's tail past the index, without writing a byte.
		o, t, err := openLog(db, dir, string(id), true, opts.ReadOnly && opts.Damaged, nil)
		if o != nil {
			objs = o
		}
		if t != nil {
			tail = t.KV
			if t.Torn {
				torn = fmt.Sprintf("%s at offset %d", t.EndFile, t.End.Off)
			}
		}
		if err != nil {
			if err := note(err); err != nil {
				return fail(err)
			}
		}
	}
	if objs == nil {
		objs = cas.NewBadger(db)
	}
	var next uint64
	err = db.View(func(txn *badger.Txn) error {
		r := reader{txn, tail}
		high, err := r.highestSeq()
		next = high + 1
		if err != nil {
			return err
		}
		err = checkMarks(r, man, high)
		if err != nil && torn != "" {
			// The log ends early: the torn frame is where it was lost.
			err = fmt.Errorf("%w; the log ends early, in %s (a torn frame that no later frame shows was synced)", err, torn)
		}
		return err
	})
	if err != nil {
		if err := note(corrupt(err)); err != nil {
			return fail(err)
		}
	}
	if !opts.ReadOnly {
		_ = objs.CloseLog()
		_ = db.Close()
		sh.close()
		return damage, nil, nil
	}
	j := start(db, objs, next, opts)
	j.readOnly = true
	j.shadow = sh
	j.tail = tail
	return damage, j, nil
}

// checkMarks compares Badger's journal with the manifest: it must reach
// the durable seq, hold the durable generation record (unless gc dropped
// it), and be the store the manifest names.
func checkMarks(r reader, man *Manifest, high uint64) error {
	if man == nil {
		return nil
	}
	id, err := r.get(keyID)
	if err != nil {
		return err
	}
	if id != nil && string(id) != man.ID {
		return fmt.Errorf("%w: the manifest names store %s but Badger holds store %s", ErrCorrupt, man.ID, id)
	}
	if high < man.Durable {
		return fmt.Errorf("%w: store lost acknowledged history: manifest says durable through seq %d%s, the journal ends at seq %d",
			ErrCorrupt, man.Durable, genNote(man), high)
	}
	if man.Gen == 0 {
		return nil
	}
	floor := uint64(1)
	if v, err := r.get(keyFloor); err != nil {
		return err
	} else if v != nil {
		if floor, err = parseUint64(v); err != nil {
			return err
		}
	}
	if man.Gen < floor {
		return nil
	}
	v, err := r.get(seqKey(prefixRecord, man.Gen))
	if err != nil {
		return fmt.Errorf("%w: generation record at seq %d unreadable: %v", ErrCorrupt, man.Gen, err)
	}
	if v == nil {
		return fmt.Errorf("%w: store lost acknowledged history: manifest says a generation was synced at seq %d, the journal has no record there", ErrCorrupt, man.Gen)
	}
	if r, err := decodeAt(man.Gen, v); err != nil || r.Op != OpGeneration {
		return fmt.Errorf("%w: the synced generation record at seq %d is damaged", ErrCorrupt, man.Gen)
	}
	return nil
}

func genNote(m *Manifest) string {
	if m.Gen == 0 {
		return ""
	}
	return fmt.Sprintf(" (newest generation at seq %d)", m.Gen)
}
