package journal

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
)

// format5Objects are the objects of testdata/format5.tar.gz, a store the
// format-5 reynfs wrote: seq 1 the first two of format3Objects (one
// pack), seq 2 the third (a delta on the first), seq 3 a chunk too large
// for a pack (whole, zstd). Its index entries are fixed-width.
func format5Objects() [][]byte {
	o := format3Objects()
	big := bytes.Repeat([]byte("a whole chunk, zstd-compressed alone, larger than a pack takes. "), 400)
	return [][]byte{o[0], o[1], o[2], big}
}

// indexForms counts a store's object index entries by form: compact
// (format 6, a tag byte with the high bit) or fixed-width.
func indexForms(t *testing.T, dir string) (compact, fixed int) {
	t.Helper()
	db, err := badger.Open(badgerOptions(dir, zerolog.Nop()).WithReadOnly(true))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.Prefix = []byte{cas.LogPrefix}
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			err := it.Item().Value(func(v []byte) error {
				if len(v) > 0 && v[0]&0x80 != 0 {
					compact++
				} else {
					fixed++
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return compact, fixed
}

// TestUpgradeFormat5: a store the format-5 code wrote (fixed-width index
// entries for a pack's objects, a delta and a whole object) is read as it
// is by a read-only open, which changes nothing; a writable open writes
// the current format, keeps reading the old entries and writes new ones
// compact; an index rebuilt from the log is compact throughout.
func TestUpgradeFormat5(t *testing.T) {
	dir := untar(t, "format5.tar.gz")
	objs := format5Objects()
	if k := logKinds(t, dir); k['P'] != 1 || k['D'] != 1 || k['c'] != 1 {
		t.Fatalf("fixture log entries %v, want a pack, a delta and a whole blob", k)
	}
	if c, f := indexForms(t, dir); c != 0 || f != 4 {
		t.Fatalf("fixture index: %d compact and %d fixed-width entries, want 0 and 4", c, f)
	}
	sums := storeSums(t, dir)
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a format-5 store: %v", err)
	}
	checkRecords(t, ro, 3)
	checkObjects(t, ro, objs)
	if f := formatOf(t, ro); f != "5" {
		t.Fatalf("m/format = %q after a read-only open", f)
	}
	ro.Close()
	if !sameSums(sums, storeSums(t, dir)) {
		t.Fatal("a read-only open changed a format-5 store")
	}

	j := openT(t, dir, Options{})
	if f := formatOf(t, j); f != strconv.Itoa(storeFormat) {
		t.Fatalf("m/format = %q after a writable open, want %d", f, storeFormat)
	}
	checkRecords(t, j, 3)
	checkObjects(t, j, objs)
	b1 := blobOf("a chunk written after the upgrade, packed with the next one")
	b2 := blobOf("another chunk written after the upgrade")
	appendT(t, j, &Record{Op: OpData, Ino: 4, Size: cas.ChunkSize + uint64(len(b2.Data)), Chunks: []Chunk{{0, b1.Hash}, {1, b2.Hash}}}, b1, b2)
	objs = append(objs, b1.Data, b2.Data)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if c, f := indexForms(t, dir); c != 2 || f != 4 {
		t.Fatalf("index after the upgrade: %d compact and %d fixed-width entries, want 2 and 4", c, f)
	}
	if m, err := readManifest(ManifestPath(dir)); err != nil || m.Format != storeFormat {
		t.Fatalf("manifest after the upgrade: %+v, %v", m, err)
	}
	j = openT(t, dir, Options{})
	checkRecords(t, j, 4)
	checkObjects(t, j, objs)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	dropObjectIndex(t, dir)
	setLogPos(t, dir, 1, 64) // replay the whole log
	j = openT(t, dir, Options{})
	checkRecords(t, j, 4)
	checkObjects(t, j, objs)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if c, f := indexForms(t, dir); c != 6 || f != 0 {
		t.Fatalf("rebuilt index: %d compact and %d fixed-width entries, want 6 and 0", c, f)
	}
}
