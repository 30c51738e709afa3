package cas_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/castest"
)

// LogEntries accounts for every byte of the log, and names each blob as
// stored and each key write of a frame.
func TestLogEntriesAccountsForEveryByte(t *testing.T) {
	dir := t.TempDir()
	s, _ := newLogged(t, dir)
	text := bytes.Repeat([]byte("package main // a line of source\n"), 300)
	noise := castest.Data(3, 5000)
	ht, hn := cas.Sum(text), cas.Sum(noise)
	// One small object in a frame is stored alone; two are packed.
	small1 := bytes.Repeat([]byte("an inode object, say\n"), 10)
	small2 := bytes.Repeat([]byte("another inode object\n"), 10)
	for _, f := range []*cas.Frame{
		{Blobs: []cas.Blob{{Hash: ht, Data: text}}},
		{Blobs: []cas.Blob{{Hash: hn, Data: noise}}},
		{Blobs: []cas.Blob{{Hash: cas.Sum(small1), Data: small1}, {Hash: cas.Sum(small2), Data: small2}}},
		{First: 1, Last: 1, Ops: []cas.Op{{Key: []byte("j1"), Val: []byte("record")}, {Key: []byte("m/x"), Del: true}}},
	} {
		if _, _, err := s.Commit(f); err != nil {
			t.Fatal(err)
		}
	}
	var packed []cas.Hash
	var total int
	seen := map[cas.Hash]cas.LogEntry{}
	var keys []string
	err := cas.LogEntries(filepath.Join(dir, "db.log"), func(e cas.LogEntry) error {
		total += e.Head + e.Data
		switch e.Kind {
		case 'c':
			seen[e.Hash] = e
		case 'P':
			packed = append(packed, e.Members...)
			if len(e.MemberRaw) != len(e.Members) || e.MemberRaw[0] != len(small1) || e.Data >= len(small1)+len(small2) {
				t.Errorf("pack entry %+v, want both objects compressed together", e)
			}
		case 's', 'd':
			keys = append(keys, string(e.Kind)+string(e.Key))
		case 'T':
			t.Errorf("a torn tail of %d bytes in a clean log", e.Data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var size int
	ents, _ := os.ReadDir(filepath.Join(dir, "db.log"))
	for _, e := range ents {
		fi, _ := e.Info()
		size += int(fi.Size())
	}
	if total != size {
		t.Errorf("entries account for %d bytes, the log is %d", total, size)
	}
	if e, ok := seen[ht]; !ok || e.Comp == 0 || e.Data >= len(text) {
		t.Errorf("text blob: %+v, want it compressed", e)
	}
	if e, ok := seen[hn]; !ok || e.Comp != 0 || e.Data != len(noise) {
		t.Errorf("noise blob: %+v, want it raw", e)
	}
	if len(packed) != 2 || packed[0] != cas.Sum(small1) || packed[1] != cas.Sum(small2) {
		t.Errorf("packed objects %v, want the two small ones in frame order", packed)
	}
	if got := len(keys); got < 2 || keys[len(keys)-2] != "sj1" || keys[len(keys)-1] != "dm/x" {
		t.Errorf("key entries %q, want the frame's set and delete last", keys)
	}
}
