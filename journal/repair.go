package journal

// Repair of a store whose Badger logs are damaged. Since store format 2
// Badger is the index of the segment log: everything a commit writes to
// it is also in a log frame, and Open brings the index up to the log from
// "m/logpos". A Badger log (a memtable WAL, the newest value log) whose
// replay stops before a whole entry is refused by Open as damage (a crash
// cannot leave it; a power cut can, when the kernel wrote a later page of
// the mapped WAL and not an earlier one). Repair handles the newest
// memtable WAL, the one the store was writing (the common case; an older
// one awaits its flush to a table for moments only): it keeps a copy of
// the file, lets Badger truncate it where its replay stops, as a writable
// open does, and opens the store, which catches the index up from the
// segment log from the log position Badger then holds. That position is
// written last in each batch, so it never lies past an index entry the
// cut dropped; an older WAL's position could (the newer WAL's would win),
// which is why Repair refuses damage anywhere else. Every write that is
// not in a log frame (names, floors, dropped generations, the collector's
// deletions) is followed by a sync, so a power cut cannot leave one of
// those in the cut part; damage that did (a disk corrupting synced data)
// is reported by key. What the truncation dropped is then looked up:
// each whole entry found past the damage either is back, from the log, or
// is reported by key. Nothing is repaired silently: Open still refuses
// the store until `reynfs fsck --repair` is run.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
)

// RepairResult is what Repair did.
type RepairResult struct {
	Logs []LogRepair `json:"logs"` // the damaged Badger logs (none: nothing to repair)
	// Copies is the directory holding a copy of every damaged log, as it
	// was before the repair.
	Copies string `json:"copies,omitempty"`
	// Restored counts the keys written past a damage that the store has
	// again after the repair (from the segment log); Missing names the
	// others.
	Restored int      `json:"restored"`
	Missing  []string `json:"missing,omitempty"`
}

// LogRepair is one damaged Badger log.
type LogRepair struct {
	File   string `json:"file"`
	Damage string `json:"damage"`
	Cut    int64  `json:"cut"`     // where Badger's replay stops: the file ends there now
	Past   int    `json:"entries"` // whole entries found past the damage
}

// Repair repairs the damaged Badger logs of the unopened store in dir
// (see above) and returns what it did; a store without damaged logs is
// left as it is. It needs a store with a segment log (format 2 or later)
// and refuses one in use (ErrLocked). reindex rebuilds the indexes kept
// beside the records (rewind.Reindex, which a mount also runs) before the
// lost entries are looked up.
func Repair(dir string, opts Options, reindex func(*Journal) error) (*RepairResult, error) {
	res, err := repair(dir, opts, reindex)
	if err != nil {
		return res, fmt.Errorf("repair %s: %w", dir, err)
	}
	return res, nil
}

func repair(dir string, opts Options, reindex func(*Journal) error) (*RepairResult, error) {
	man, err := readManifest(ManifestPath(dir))
	if err != nil {
		return nil, err
	}
	if man == nil || man.Format < 2 {
		return nil, fmt.Errorf("%w: store format 1 has no segment log to rebuild Badger's index from (`reynfs fsck --salvage OUTDIR` reads what is intact)", ErrFormat)
	}
	if _, err := os.Lstat(LogPath(dir)); err != nil {
		return nil, fmt.Errorf("%w: no segment log: %v", ErrCorrupt, err)
	}
	res := &RepairResult{}
	lost, err := keepDamaged(dir, res)
	if err != nil || len(res.Logs) == 0 {
		return res, err
	}
	opts.ReadOnly, opts.Damaged, opts.repairLogs = false, false, true
	j, err := Open(dir, opts)
	if err != nil {
		return res, err
	}
	if err := reindex(j); err != nil {
		_ = j.Close()
		return res, err
	}
	err = j.db.View(func(txn *badger.Txn) error {
		for _, e := range lost {
			switch back, err := restored(txn, e); {
			case err != nil:
				return err
			case back:
				res.Restored++
			default:
				res.Missing = append(res.Missing, describeKey(e))
			}
		}
		return nil
	})
	if cerr := j.Close(); err == nil {
		err = cerr
	}
	return res, err
}

// walEntry is a whole Badger log entry found past a damage: its key
// without the version, and its value.
type walEntry struct {
	key, val []byte
	meta     byte
}

const (
	walDelete  = 1 << 0 // Badger's bitDelete
	walPointer = 1 << 1 // bitValuePointer: the value is in a value log
)

// keepDamaged copies every damaged Badger log of dir into a new directory
// beside it and returns the entries found past each damage, the newest of
// each key. It holds the store directory's flock, as Badger does, while
// it looks: a store in use is refused.
func keepDamaged(dir string, res *RepairResult) ([]walEntry, error) {
	lock, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil, fmt.Errorf("%w (a daemon or another command holds %s)", ErrLocked, dir)
	}
	scans, err := scanLogs(dir)
	if err == nil || !isLogDamage(err) {
		return nil, err
	}
	newest := ""
	for _, s := range scans {
		if strings.HasSuffix(s.Path, ".mem") {
			newest = max(newest, s.Path)
		}
	}
	for _, s := range scans {
		if s.Damage != "" && s.Path != newest {
			return nil, fmt.Errorf("%w: Badger log %s: %s; repair cuts only the newest write-ahead log (a newer log would hide what an older one's cut loses, and values past a cut in a value log are still referenced): `reynfs fsck --salvage OUTDIR` reads what is intact",
				ErrCorrupt, filepath.Base(s.Path), s.Damage)
		}
	}
	res.Copies = filepath.Clean(dir) + ".damaged-" + time.Now().UTC().Format("20060102T150405Z")
	if err := os.Mkdir(res.Copies, 0o700); err != nil {
		return nil, err
	}
	byKey := map[string]int{}
	var lost []walEntry
	for _, s := range scans {
		if s.Damage == "" {
			continue
		}
		b, err := copyFile(s.Path, filepath.Join(res.Copies, filepath.Base(s.Path)))
		if err != nil {
			return nil, err
		}
		past := entriesPast(b, s.End)
		res.Logs = append(res.Logs, LogRepair{File: filepath.Base(s.Path), Damage: s.Damage, Cut: s.End, Past: len(past)})
		for _, e := range past {
			if i, ok := byKey[string(e.key)]; ok {
				lost[i] = e
				continue
			}
			byKey[string(e.key)] = len(lost)
			lost = append(lost, e)
		}
	}
	return lost, syncDir(res.Copies, filepath.Dir(res.Copies))
}

// copyFile copies src to a new file dst, synced, and returns src's bytes.
func copyFile(src, dst string) ([]byte, error) {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	b, err := io.ReadAll(in)
	if err != nil {
		return nil, err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := out.Write(b); err != nil {
		out.Close()
		return nil, err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return nil, err
	}
	return b, out.Close()
}

func syncDir(dirs ...string) error {
	for _, d := range dirs {
		f, err := os.Open(d)
		if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// entriesPast returns the whole entries of a Badger log after off, found
// the way scanLogBytes finds damage (at every offset that could start
// one), without Badger's own transaction markers.
func entriesPast(b []byte, off int64) []walEntry {
	var out []walEntry
	for q := off; q < int64(len(b)); {
		if !plausibleHeader(b[q:]) {
			q++
			continue
		}
		n, meta, key, val, whole := logEntryAt(b, q)
		if !whole || len(key) <= 8 {
			q++
			continue
		}
		q += n
		k := key[:len(key)-8] // the version
		if bytes.HasPrefix(k, []byte("!badger!")) {
			continue
		}
		out = append(out, walEntry{key: bytes.Clone(k), val: bytes.Clone(val), meta: meta})
	}
	return out
}

// restored reports whether the store holds what e wrote: a deleted key
// absent, a set key present with the same value (a value in a value log,
// and the log position, only present).
func restored(txn *badger.Txn, e walEntry) (bool, error) {
	it, err := txn.Get(e.key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return e.meta&walDelete != 0, nil
	}
	if err != nil {
		return false, err
	}
	if e.meta&walDelete != 0 {
		return false, nil
	}
	if e.meta&walPointer != 0 || bytes.Equal(e.key, cas.KeyLogPos) {
		return true, nil // catch-up ends by writing the log's end there
	}
	v, err := it.ValueCopy(nil)
	if err != nil {
		return false, err
	}
	if len(e.key) == 1+len(cas.Hash{}) && e.key[0] == cas.LogPrefix {
		// A format-5 entry comes back compact from a replay.
		return cas.SameIndexEntry(v, e.val), nil
	}
	return bytes.Equal(v, e.val), nil
}

// describeKey names what a lost entry was, for the report.
func describeKey(e walEntry) string {
	what := "set"
	if e.meta&walDelete != 0 {
		what = "delete"
	}
	k := e.key
	switch {
	case len(k) == 1+len(cas.Hash{}) && (k[0] == cas.LogPrefix || k[0] == cas.KeyPrefix):
		var h cas.Hash
		copy(h[:], k[1:])
		return fmt.Sprintf("%s of object %s's index entry", what, h)
	case len(k) == 9 && (k[0] == prefixRecord || k[0] == prefixReset):
		return fmt.Sprintf("%s of record %d", what, binary.BigEndian.Uint64(k[1:]))
	}
	return fmt.Sprintf("%s of key %q", what, k)
}
