package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestPrefillLeavesTheReserve: on a nearly full disk the segment log
// pre-writes nothing (cas/prefill.go asks space.prefillRoom) and commits
// go on by appending; with space back it pre-writes again, and Admit
// counts the pre-written bytes as free for the log.
func TestPrefillLeavesTheReserve(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	j := openT(t, dir, Options{})
	const total = 1 << 30
	var avail atomic.Uint64
	avail.Store(keepFree(total, AdmitWrite) + 8<<20) // below the prefill's headroom
	j.SetFreeSpace(func() (uint64, uint64, error) { return avail.Load(), total, nil })
	seg := filepath.Join(LogPath(dir), "0000000000000001.seg")
	write := func(from, to int) {
		for i := from; i < to; i++ {
			b := blobOf(fmt.Sprintf("blob %d %0500d", i, i))
			appendT(t, j, &Record{Op: OpData, Ino: 2, Size: uint64(len(b.Data)), Chunks: []Chunk{{0, b.Hash}}}, b)
			if err := j.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, 20)
	time.Sleep(50 * time.Millisecond) // a prefill step, if one were allowed
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if end := j.objs.LogEnd().Off; fi.Size() != end || j.objs.Prefilled() != 0 {
		t.Fatalf("near the reserve: segment %d bytes, log end %d, prefilled %d: want no prefill", fi.Size(), end, j.objs.Prefilled())
	}
	avail.Store(total / 2)
	deadline := time.Now().Add(10 * time.Second)
	for i := 20; j.objs.Prefilled() == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatal("no prefill 10 s after space came back")
		}
		write(i, i+1) // a commit kicks the prefill (which rests 1 s after a refusal)
		time.Sleep(20 * time.Millisecond)
	}
	// Admit sees the pre-written bytes as free: with the file system's
	// free space just below what a write needs, they make up the rest.
	pre := uint64(j.objs.Prefilled())
	need := 2*uint64(4096) + keepFree(total, AdmitWrite)
	avail.Store(need - pre/2)
	time.Sleep(admitReuse * 2)
	if err := j.Admit(4096, AdmitWrite); err != nil {
		t.Fatalf("Admit with %d bytes pre-written: %v", pre, err)
	}
}

// TestCheckpointDoesNotPrefill: the index checkpoint's log sync, which a
// bulk writer that never fsyncs gets every second and every 64 MiB, does
// not start a prefill round (cas/prefill.go): the writer's frames would
// only overwrite the zeros. A sync a caller asks for still does.
func TestCheckpointDoesNotPrefill(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	j := openT(t, dir, Options{})
	for i := range 64 {
		b := blobOf(fmt.Sprintf("bulk %d %0*d", i, 60000, i))
		appendT(t, j, &Record{Op: OpData, Ino: 2, Size: uint64(len(b.Data)), Chunks: []Chunk{{0, b.Hash}}}, b)
	}
	if err := j.ckpt.run(); err != nil {
		t.Fatal(err)
	}
	// The old code's round started at once; give one every chance to.
	for range 20 {
		if p := j.objs.Prefilled(); p != 0 {
			t.Fatalf("%d bytes pre-written after the index checkpoint alone, want 0", p)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for j.objs.Prefilled() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no prefill 10 s after an fsync's sync")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
