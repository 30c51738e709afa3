package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSegLogIndexLossRecovered: fsync'd writes survive kill -9 of the
// daemon even when Badger, the index, then loses the newest tenth of its
// write-ahead log (as a power cut takes its unsynced pages): the next
// mount rebuilds the index from the segment log, every fsync'd byte is
// there, and the store checks clean. Before the segment log this store
// was refused as having lost acknowledged history.
func TestSegLogIndexLossRecovered(t *testing.T) {
	dir, files := damageProject(t)
	m := mountProject(t, dir)
	f, err := os.OpenFile(filepath.Join(dir, "synced.txt"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for i := range 60 {
		line := fmt.Sprintf("fsync'd line %d\n", i)
		want.WriteString(line)
		if _, err := f.WriteString(line); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	m.Kill9()
	if err := syscall.Unmount(m.Dir, syscall.MNT_DETACH); err != nil {
		t.Fatalf("detach the dead mount: %v", err)
	}
	w := newestFile(t, m.Store, ".mem")
	if w == "" {
		t.Fatal("no Badger WAL")
	}
	if err := os.Truncate(w, dataEnd(t, w)*9/10); err != nil {
		t.Fatal(err)
	}

	m.Mount()
	if got, err := os.ReadFile(filepath.Join(dir, "synced.txt")); err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("fsync'd file after the crash: %d bytes (%v), want %d", len(got), err, want.Len())
	}
	for name, data := range files {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s after the crash: %v", name, err)
		}
	}
	m.Unmount() // and the cleanup's fsck must find the store clean
}
