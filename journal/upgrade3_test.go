package journal

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
)

// setFormat rewrites "m/format" and the manifest's format, as a store
// written by the reynfs of that format has them.
func setFormat(t *testing.T, dir string, f string) {
	t.Helper()
	db, err := badger.Open(badgerOptions(dir, zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(txn *badger.Txn) error { return txn.Set(keyFormat, []byte(f)) })
	if err == nil {
		err = db.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := readManifest(ManifestPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	m.Format = int(f[0] - '0')
	if err := writeManifest(ManifestPath(dir), m); err != nil {
		t.Fatal(err)
	}
}

func formatOf(t *testing.T, j *Journal) string {
	t.Helper()
	var v []byte
	err := j.DB().View(func(txn *badger.Txn) error {
		var err error
		v, err = getValue(txn, keyFormat)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// TestUpgradeFormat2: a read-only open reads a format-2 store (no deltas)
// as it is and changes nothing; the first writable open writes format 3
// (in Badger and the manifest), the old objects stay readable, and from
// then on a blob with a Base is stored as a delta and read back whole.
func TestUpgradeFormat2(t *testing.T) {
	dir := t.TempDir() + "/db"
	head := writeSome(t, dir, 5)
	setFormat(t, dir, "2")
	sums := storeSums(t, dir)
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a format-2 store: %v", err)
	}
	checkRecords(t, ro, head)
	if f := formatOf(t, ro); f != "2" {
		t.Fatalf("m/format = %q after a read-only open", f)
	}
	ro.Close()
	if !sameSums(sums, storeSums(t, dir)) {
		t.Fatal("a read-only open changed a format-2 store")
	}

	j := openT(t, dir, Options{})
	if f := formatOf(t, j); f != strconv.Itoa(storeFormat) {
		t.Fatalf("m/format = %q after a writable open, want %d", f, storeFormat)
	}
	checkRecords(t, j, head)
	base := blobOf(strings.Repeat("0123456789abcdef", 400))
	next := bytes.Clone(base.Data)
	next[1000] = 'X'
	nb := cas.Blob{Hash: cas.Sum(next), Data: next, Base: base.Hash}
	appendT(t, j, &Record{Op: OpData, Ino: 3, Size: uint64(len(base.Data)), Chunks: []Chunk{{0, base.Hash}}}, base)
	appendT(t, j, &Record{Op: OpData, Ino: 3, Size: uint64(len(next)), Chunks: []Chunk{{0, nb.Hash}}}, nb)
	var size int64
	_ = j.Objects().Each(func(h cas.Hash, n int64) error {
		if h == nb.Hash {
			size = n
		}
		return nil
	})
	if size == 0 || size > 100 {
		t.Fatalf("a %d-byte blob one byte off its base is stored in %d bytes, want a small delta", len(next), size)
	}
	j.Close()
	if m, err := readManifest(ManifestPath(dir)); err != nil || m.Format != storeFormat {
		t.Fatalf("manifest after the upgrade: %+v, %v", m, err)
	}
	j = openT(t, dir, Options{})
	checkRecords(t, j, head+2)
	if got, err := j.Objects().Get(nb.Hash); err != nil || !bytes.Equal(got, next) {
		t.Fatalf("the delta read back after reopening: %v", err)
	}
}
