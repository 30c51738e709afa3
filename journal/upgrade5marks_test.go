package journal

import (
	"strconv"
	"testing"

	"github.com/reynfs/reynfs/cas"
)

// frameHeads counts the frame headers of the store's log by their size:
// 32 bytes (format 5 and older, no mark) and 48 (format 6, with one).
func frameHeads(t *testing.T, dir string) map[int]int {
	t.Helper()
	heads := map[int]int{}
	err := cas.LogEntries(LogPath(dir), func(e cas.LogEntry) error {
		if e.Kind == 'F' {
			heads[e.Head]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return heads
}

// TestUpgradeFormat5Marks: a store the format-5 reynfs wrote (testdata/
// format5-frames.tar.gz: seq 1 and 2 whole chunks, seq 3 a delta, seq 4 two
// small objects, each record in a frame without a synced-through mark)
// is read as it is by a read-only open, which changes nothing; the first
// writable open writes format 6, whose frames carry marks, after the old
// ones in the same segment; a replay of the whole mixed log (the index's
// position lost) finds every record and object again.
func TestUpgradeFormat5Marks(t *testing.T) {
	dir := untar(t, "format5-frames.tar.gz")
	o := format3Objects()
	objs := append(o, []byte("format 5: a small object, packed"), []byte("format 5: another small object, packed with it"))
	if k := logKinds(t, dir); k['c'] != 4 || k['D'] != 1 {
		t.Fatalf("fixture log entries %v, want 4 whole blobs and a delta", k)
	}
	if h := frameHeads(t, dir); h[32] != 4 || len(h) != 1 {
		t.Fatalf("fixture frame headers by size %v, want 4 of 32 bytes", h)
	}
	sums := storeSums(t, dir)
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a format-5 store: %v", err)
	}
	checkRecords(t, ro, 4)
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
	checkRecords(t, j, 4)
	checkObjects(t, j, objs)
	for i := range 2 {
		b := blobOf("a chunk written after the upgrade to format 6, number " + strconv.Itoa(i))
		appendT(t, j, &Record{Op: OpData, Ino: 5, Size: uint64(len(b.Data)), Chunks: []Chunk{{0, b.Hash}}}, b)
		objs = append(objs, b.Data)
		if err := j.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if h := frameHeads(t, dir); h[32] != 4 || h[48] < 2 {
		t.Fatalf("frame headers by size after the upgrade %v, want the fixture's 4 of 32 bytes and 48-byte ones", h)
	}
	if m, err := readManifest(ManifestPath(dir)); err != nil || m.Format != storeFormat {
		t.Fatalf("manifest after the upgrade: %+v, %v", m, err)
	}
	dropObjectIndex(t, dir)
	setLogPos(t, dir, 1, 64) // replay the whole log
	j = openT(t, dir, Options{})
	checkRecords(t, j, 6)
	checkObjects(t, j, objs)
}
