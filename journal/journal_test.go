package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
)

func openT(t testing.TB, dir string, opts Options) *Journal {
	t.Helper()
	j, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j
}

func appendT(t testing.TB, j *Journal, r *Record, blobs ...cas.Blob) uint64 {
	t.Helper()
	if err := j.Enqueue(r, blobs).Wait(); err != nil {
		t.Fatal(err)
	}
	return r.Seq
}

func unlink(name string) *Record { return &Record{Op: OpUnlink, Parent: 1, Name: name} }

func wantOpenErr(t *testing.T, dir string, sentinel error, text string) {
	t.Helper()
	j, err := Open(dir, Options{})
	if err == nil {
		_ = j.Close()
		t.Fatalf("Open(%s) succeeded, want %v", dir, sentinel)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("Open = %v, want %v", err, sentinel)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, text) {
		t.Errorf("message %q: want one line containing %q", msg, text)
	}
}

func TestKeyPrefixesDistinct(t *testing.T) {
	ps := map[byte]string{prefixRecord: "record", prefixReset: "reset", cas.KeyPrefix: "object", 'm': "meta"}
	if len(ps) != 4 {
		t.Fatalf("key prefixes collide: %v", ps)
	}
}

func TestOpenNewStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store") // Open creates it
	j := openT(t, dir, Options{})
	err := j.DB().View(func(txn *badger.Txn) error {
		v, err := getValue(txn, keyFormat)
		if err == nil && string(v) != strconv.Itoa(storeFormat) {
			t.Errorf("m/format = %q, want %d", v, storeFormat)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenOtherFormat(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, Options{})
	if err := j.DB().Update(func(txn *badger.Txn) error { return txn.Set(keyFormat, []byte("7")) }); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	wantOpenErr(t, dir, ErrFormat, fmt.Sprintf("store format version 7, this reynfs reads %d", storeFormat))
}

func TestOpenNotAStore(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hi"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantOpenErr(t, dir, ErrCorrupt, "not a reynfs store")
	wantOpenErr(t, filepath.Join(dir, "notes.txt"), ErrCorrupt, "not a directory")
}

func TestOpenForeignBadger(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("user/1"), []byte("x")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wantOpenErr(t, dir, ErrCorrupt, "not a reynfs store")
}

func TestOpenDamaged(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, Options{})
	appendT(t, j, unlink("a"))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("this is not a manifest at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantOpenErr(t, dir, ErrCorrupt, "store corrupt")
}

func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	openT(t, dir, Options{})
	wantOpenErr(t, dir, ErrLocked, "in use by another process")
}

func TestSeqSurvivesTruncation(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, Options{})
	for range 10 {
		appendT(t, j, unlink("a"))
	}
	// Drop records 6..10, as retention would (it never keeps fewer, but
	// the seq counter must not depend on that).
	err := j.DB().Update(func(txn *badger.Txn) error {
		for s := uint64(6); s <= 10; s++ {
			if err := txn.Delete(seqKey(prefixRecord, s)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openT(t, dir, Options{})
	if s := appendT(t, j, unlink("b")); s != 11 {
		t.Fatalf("seq after truncation = %d, want 11", s)
	}
	// Without m/seq (a store from before a crash that lost only the
	// counter is not possible, but Open takes the max of both anyway).
	if err := j.DB().Update(func(txn *badger.Txn) error { return txn.Delete(keySeq) }); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openT(t, dir, Options{})
	if s := appendT(t, j, unlink("c")); s != 12 {
		t.Fatalf("seq from the last record = %d, want 12", s)
	}
}

func TestCommitFailureFailsJournal(t *testing.T) {
	dir := t.TempDir()
	var broken atomic.Bool
	boom := errors.New("disk on fire")
	j, err := Open(dir, Options{Fault: func(op string) error {
		if op == "commit" && broken.Load() {
			return boom
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	appendT(t, j, unlink("a"))
	broken.Store(true)
	err = j.Enqueue(unlink("b"), nil).Wait()
	if !errors.Is(err, ErrFailed) || !errors.Is(err, boom) {
		t.Fatalf("Wait after a failed commit = %v, want ErrFailed and the cause", err)
	}
	broken.Store(false) // the journal stays failed anyway
	if err := j.Enqueue(unlink("c"), nil).Wait(); !errors.Is(err, ErrFailed) {
		t.Errorf("Enqueue after failure = %v", err)
	}
	if err := j.Sync(); !errors.Is(err, ErrFailed) {
		t.Errorf("Sync after failure = %v", err)
	}
	if err := j.SetMeta("k", []byte("v")); !errors.Is(err, ErrFailed) {
		t.Errorf("SetMeta after failure = %v", err)
	}
	if j.Durable() != 1 {
		t.Errorf("Durable = %d, want 1", j.Durable())
	}
	if err := j.Close(); !errors.Is(err, ErrFailed) {
		t.Errorf("Close of a failed journal = %v", err)
	}
	j = openT(t, dir, Options{})
	if s := appendT(t, j, unlink("d")); s != 2 {
		t.Errorf("after reopen the next seq is %d, want 2 (seq 2 was never committed)", s)
	}
}

func TestSyncFailureFailsJournal(t *testing.T) {
	var broken atomic.Bool
	j := openT(t, t.TempDir(), Options{Fault: func(op string) error {
		if op == "sync" && broken.Load() {
			return errors.New("EIO")
		}
		return nil
	}})
	appendT(t, j, unlink("a"))
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	broken.Store(true)
	appendT(t, j, unlink("b"))
	if err := j.Sync(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Sync = %v, want ErrFailed", err)
	}
	if err := j.Enqueue(unlink("c"), nil).Wait(); !errors.Is(err, ErrFailed) {
		t.Errorf("Enqueue after a failed sync = %v", err)
	}
}

func TestGetCorruptRecord(t *testing.T) {
	j := openT(t, t.TempDir(), Options{})
	appendT(t, j, unlink("a"))
	if err := j.DB().Update(func(txn *badger.Txn) error {
		return txn.Set(seqKey(prefixRecord, 2), Encode(&Record{Seq: 3, Op: OpUnlink}))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Get(2); !errors.Is(err, ErrCorrupt) {
		t.Errorf("record under the wrong seq: %v, want ErrCorrupt", err)
	}
	if err := j.Iter(0, func(*Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Iter over it: %v, want ErrCorrupt", err)
	}
}

func TestEnqueueDoesNotKeepRecord(t *testing.T) {
	j := openT(t, t.TempDir(), Options{})
	r := unlink("first")
	p := j.Enqueue(r, nil)
	r.Name = "changed"
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	got, err := j.Get(p.Seq())
	if err != nil || got.Name != "first" {
		t.Errorf("stored %+v, %v: Enqueue must encode at once", got, err)
	}
}
