package journal

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
)

// untar unpacks a testdata store (regular files and directories only)
// into a new directory and returns the path of its Badger directory.
func untar(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	tr := tar.NewReader(z)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.Clean(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o700)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, 0o600)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(root, "db")
}

// format3Objects are the objects of testdata/format3.tar.gz, a store the
// format-3 reynfs wrote (seq 1: a compressible chunk and a random one,
// logged whole with their names; seq 2: a delta on the first).
func format3Objects() [][]byte {
	noise := make([]byte, 11000)
	x := uint32(1)
	for i := range noise {
		x = x*1664525 + 1013904223
		noise[i] = byte(x >> 24)
	}
	text := append(bytes.Repeat([]byte("0123456789abcdef"), 400), noise[3000:]...)
	next := bytes.Clone(text)
	next[1000] = 'X'
	return [][]byte{text, noise[:3000], next}
}

func logKinds(t *testing.T, dir string) map[byte]int {
	t.Helper()
	kinds := map[byte]int{}
	err := cas.LogEntries(LogPath(dir), func(e cas.LogEntry) error {
		kinds[e.Kind]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return kinds
}

// dropObjectIndex deletes every object's index entry: only a replay of
// the log can find them again.
func dropObjectIndex(t *testing.T, dir string) {
	t.Helper()
	db, err := badger.Open(badgerOptions(dir, zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	var keys [][]byte
	err = db.View(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.Prefix = []byte{'l'}
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if err == nil && len(keys) < 5 {
		t.Fatalf("%d object index entries, want 5", len(keys))
	}
	for _, k := range keys {
		if err == nil {
			err = db.Update(func(txn *badger.Txn) error { return txn.Delete(k) })
		}
	}
	if err == nil {
		err = db.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func checkObjects(t *testing.T, j *Journal, objs [][]byte) {
	t.Helper()
	for i, o := range objs {
		got, err := j.Objects().Get(cas.Sum(o))
		if err != nil || !bytes.Equal(got, o) {
			t.Fatalf("object %d: %v", i, err)
		}
	}
}

// TestUpgradeFormat3And4: a store written by the format-3 reynfs (names
// in the log) or the format-4 one (no names, no packs) is read as it is
// by a read-only open, which changes nothing; the first writable open
// writes the current format, whose new small blobs are packed; an index
// rebuilt from a log holding every entry kind (the index's position
// lost, as a power cut can leave it) names every object again.
func TestUpgradeFormat3And4(t *testing.T) {
	for _, c := range []struct {
		fixture, format string
		whole           byte // how the fixture logs a whole blob
	}{{"format3.tar.gz", "3", 'b'}, {"format4.tar.gz", "4", 'c'}} {
		t.Run(c.format, func(t *testing.T) {
			dir := untar(t, c.fixture)
			objs := format3Objects()
			if k := logKinds(t, dir); k[c.whole] != 2 || k['D'] != 1 || k['P'] != 0 {
				t.Fatalf("fixture log entries %v, want 2 whole blobs ('%c') and a delta", k, c.whole)
			}
			sums := storeSums(t, dir)
			ro, err := Open(dir, Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("read-only open of a format-%s store: %v", c.format, err)
			}
			checkRecords(t, ro, 2)
			checkObjects(t, ro, objs)
			if f := formatOf(t, ro); f != c.format {
				t.Fatalf("m/format = %q after a read-only open", f)
			}
			ro.Close()
			if !sameSums(sums, storeSums(t, dir)) {
				t.Fatalf("a read-only open changed a format-%s store", c.format)
			}

			j := openT(t, dir, Options{})
			if f := formatOf(t, j); f != strconv.Itoa(storeFormat) {
				t.Fatalf("m/format = %q after a writable open, want %d", f, storeFormat)
			}
			checkRecords(t, j, 2)
			checkObjects(t, j, objs)
			b1 := blobOf("a chunk written after the upgrade, packed with the next one")
			b2 := blobOf("another chunk written after the upgrade")
			appendT(t, j, &Record{Op: OpData, Ino: 4, Size: cas.ChunkSize + uint64(len(b2.Data)), Chunks: []Chunk{{0, b1.Hash}, {1, b2.Hash}}}, b1, b2)
			objs = append(objs, b1.Data, b2.Data)
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			if k := logKinds(t, dir); k[c.whole] != 2 || k['P'] != 1 {
				t.Fatalf("log entries after the upgrade %v, want the fixture's and a pack", k)
			}
			if m, err := readManifest(ManifestPath(dir)); err != nil || m.Format != storeFormat {
				t.Fatalf("manifest after the upgrade: %+v, %v", m, err)
			}
			dropObjectIndex(t, dir)
			setLogPos(t, dir, 1, 64) // replay the whole log
			j = openT(t, dir, Options{})
			checkRecords(t, j, 3)
			checkObjects(t, j, objs)
		})
	}
}
