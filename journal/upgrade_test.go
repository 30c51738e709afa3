package journal

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
)

// makeFormat1 writes a store as the format-1 code did: records, the reset
// index, objects inline under 'o', "m/seq", "m/id", "m/format" = 1 and a
// manifest of format 1, all in Badger, no log. It returns the objects.
func makeFormat1(t *testing.T, dir string, n int) []cas.Blob {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := badger.Open(badgerOptions(dir, zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	const id = "00112233445566778899aabbccddeeff"
	var blobs []cas.Blob
	err = db.Update(func(txn *badger.Txn) error {
		for _, kv := range [][2][]byte{{keyFormat, []byte("1")}, {keyID, []byte(id)}, {keySeq, uint64Bytes(uint64(n + 1))}} {
			if err := txn.Set(kv[0], kv[1]); err != nil {
				return err
			}
		}
		for i := 1; i <= n; i++ {
			data := bytes.Repeat([]byte{byte(i)}, 3000+i)
			b := cas.Blob{Hash: cas.Sum(data), Data: data}
			blobs = append(blobs, b)
			r := &Record{Op: OpData, Seq: uint64(i), Ino: 2, Size: uint64(len(data)), Chunks: []Chunk{{0, b.Hash}}}
			if err := txn.Set(cas.Key(b.Hash), data); err != nil {
				return err
			}
			if err := txn.Set(seqKey(prefixRecord, uint64(i)), Encode(r)); err != nil {
				return err
			}
		}
		reset := Encode(&Record{Op: OpReset, Seq: uint64(n + 1), ResetTo: 1})
		if err := txn.Set(seqKey(prefixRecord, uint64(n+1)), reset); err != nil {
			return err
		}
		return txn.Set(seqKey(prefixReset, uint64(n+1)), reset)
	})
	if err == nil {
		err = db.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := writeManifest(ManifestPath(dir), &Manifest{Format: 1, ID: id, Durable: uint64(n + 1)}); err != nil {
		t.Fatal(err)
	}
	return blobs
}

// TestUpgradeFormat1: a read-only open reads a format-1 store as it is;
// the first writable open creates the log and writes format 3, the old
// objects stay readable in place, and new ones go to the log.
func TestUpgradeFormat1(t *testing.T) {
	dir := t.TempDir() + "/db"
	blobs := makeFormat1(t, dir, 20)
	sums := storeSums(t, dir)
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a format-1 store: %v", err)
	}
	checkRecords(t, ro, 21)
	ro.Close()
	if !sameSums(sums, storeSums(t, dir)) {
		t.Fatal("a read-only open changed a format-1 store")
	}
	if _, err := os.Stat(LogPath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a read-only open made the log: %v", err)
	}

	j := openT(t, dir, Options{})
	checkRecords(t, j, 21)
	if v, _ := j.GetMeta("x"); v != nil {
		t.Fatal("meta out of nothing")
	}
	if n, err := j.ResetCount(); err != nil || n != 1 {
		t.Fatalf("ResetCount = %d, %v", n, err)
	}
	nb := blobOf("written after the upgrade")
	appendT(t, j, &Record{Op: OpData, Ino: 3, Size: uint64(len(nb.Data)), Chunks: []Chunk{{0, nb.Hash}}}, nb)
	var objs int
	if err := j.Objects().Each(func(cas.Hash, int64) error { objs++; return nil }); err != nil || objs != len(blobs)+1 {
		t.Fatalf("Each lists %d objects (%v), want %d", objs, err, len(blobs)+1)
	}
	j.Close()

	j = openT(t, dir, Options{})
	checkRecords(t, j, 22)
	err = j.DB().View(func(txn *badger.Txn) error {
		v, err := getValue(txn, keyFormat)
		if err == nil && string(v) != strconv.Itoa(storeFormat) {
			t.Errorf("m/format = %q after the upgrade, want %d", v, storeFormat)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(firstSeg(dir)); err != nil {
		t.Fatalf("no log after the upgrade: %v", err)
	}
	j.Close()
	if m, err := readManifest(ManifestPath(dir)); err != nil || m.Format != storeFormat {
		t.Fatalf("manifest after the upgrade: %+v, %v", m, err)
	}
}

// A format-2 store whose log directory is gone is refused, never opened
// (or upgraded) without it.
func TestLogMissingRefused(t *testing.T) {
	dir := t.TempDir() + "/db"
	writeSome(t, dir, 3)
	if err := os.RemoveAll(LogPath(dir)); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		if _, err := Open(dir, Options{ReadOnly: ro}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read-only %v: open without the log = %v, want ErrCorrupt", ro, err)
		}
	}
	if _, err := os.Stat(LogPath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refused open made a new log")
	}
}
