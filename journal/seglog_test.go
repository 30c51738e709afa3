package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
)

// firstSeg is the path of the log's first segment of the store in dir.
func firstSeg(dir string) string {
	return filepath.Join(LogPath(dir), "0000000000000001.seg")
}

// setLogPos rewrites the log position the index claims to cover, as a
// power cut that took Badger's unsynced writes would leave it: the next
// open replays every frame after it.
func setLogPos(t *testing.T, dir string, seg uint64, off int64) {
	t.Helper()
	db, err := badger.Open(badgerOptions(dir, zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	v := binary.BigEndian.AppendUint64(nil, seg)
	v = binary.BigEndian.AppendUint64(v, uint64(off))
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set(cas.KeyLogPos, v) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkRecords checks that seqs 1..head are all readable with their blobs.
func checkRecords(t *testing.T, j *Journal, head uint64) {
	t.Helper()
	var next uint64 = 1
	err := j.Iter(0, func(r *Record) error {
		if r.Seq != next {
			return fmt.Errorf("seq %d follows %d", r.Seq, next-1)
		}
		next++
		for _, c := range r.Chunks {
			if _, err := j.Objects().Get(c.Hash); err != nil {
				return fmt.Errorf("seq %d: blob: %w", r.Seq, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if next-1 != head || j.Head() != head {
		t.Fatalf("journal ends at %d (head %d), want %d", next-1, j.Head(), head)
	}
}

// TestCatchUpReplaysLog: an index that lags the log (a power cut took
// Badger's unsynced writes) is brought up to date on open, read-only
// opens included, and replaying frames already indexed is harmless.
func TestCatchUpReplaysLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	head := writeSome(t, dir, 50)
	setLogPos(t, dir, 1, 64)
	sums := storeSums(t, dir)
	j, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, j, head)
	if n, err := j.ResetCount(); err != nil || n != 0 {
		t.Fatalf("ResetCount = %d, %v", n, err)
	}
	j.Close()
	if !sameSums(sums, storeSums(t, dir)) {
		t.Fatal("a read-only open changed the store's files")
	}
	j = openT(t, dir, Options{})
	checkRecords(t, j, head)
	j.Close()
}

// TestDamagedLogRefused flips bytes inside a frame that more frames
// follow: a crash never does that, so Open refuses (naming the segment
// and the offset) without writing, and a read-only open with Damaged
// reports it.
func TestDamagedLogRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	writeSome(t, dir, 200)
	setLogPos(t, dir, 1, 64)
	fi, err := os.Stat(firstSeg(dir))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(firstSeg(dir), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sums := storeSums(t, dir)
	for _, ro := range []bool{false, true} {
		_, err := Open(dir, Options{ReadOnly: ro})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(firstSeg(dir))+" at offset") {
			t.Fatalf("read-only %v: open of a damaged store = %v, want ErrCorrupt naming %s", ro, err, filepath.Base(firstSeg(dir)))
		}
	}
	j, err := Open(dir, Options{ReadOnly: true, Damaged: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Damage()) == 0 || !strings.Contains(j.Damage()[0], ".seg at offset") {
		t.Fatalf("Damage = %q", j.Damage())
	}
	if _, err := j.Get(1); err != nil {
		t.Fatalf("a record before the damage: %v", err)
	}
	j.Close()
	if !sameSums(sums, storeSums(t, dir)) {
		t.Fatal("opening a damaged store changed its files")
	}
}

// dataEnd returns the offset after the last non-zero byte of the file at
// path: the end of its last frame (which ends with "m/seq", a non-zero
// seq), before the zeros pre-written past it.
func dataEnd(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(bytes.TrimRight(b, "\x00")))
}

// runKillChild runs killChild in dir, killed at the fault point at, and
// returns the size of the first segment before the fatal commit.
func runKillChild(t *testing.T, dir, at string) int64 {
	t.Helper()
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillBetweenFrameAndIndex$", "-test.count=1")
	cmd.Env = append(os.Environ(), killEnv+"="+at, crashEnv+"="+dir)
	out, err := cmd.Output()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v, output %q", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "size "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n
			}
		}
	}
	if at == "catchup" {
		return 0
	}
	t.Fatalf("child printed no size: %q", out)
	return 0
}

// TestKillMidFrame: kill -9 with half a frame written: the torn frame is
// cut on open, the records before it are all there.
func TestKillMidFrame(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	before := runKillChild(t, dir, "frame")
	j := openT(t, dir, Options{})
	checkRecords(t, j, 10)
	if fi, _ := os.Stat(firstSeg(dir)); fi.Size() != before {
		t.Fatalf("segment is %d bytes after the cut, want %d", fi.Size(), before)
	}
	appendT(t, j, &Record{Op: OpUnlink, Parent: 1, Name: "after"})
}

// TestKillDuringCatchUp: kill -9 while an open is catching the index up
// (the log's tail found, the index not yet written): the next open does
// it again and finds every record.
func TestKillDuringCatchUp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	runKillChild(t, dir, "index")
	runKillChild(t, dir, "catchup")
	j := openT(t, dir, Options{})
	checkRecords(t, j, 11)
}

// TestTornTailCut: the last frame written in part (a crash during the
// write) is cut off by a writable open, after a read-only open has read
// the store without cutting; everything before it stays.
func TestTornTailCut(t *testing.T) {
	for _, keep := range []int64{0, 5, 40, -1} {
		t.Run(strconv.FormatInt(keep, 10), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			before := runKillChild(t, dir, "index")
			end := dataEnd(t, firstSeg(dir))
			if keep < 0 {
				keep = end - before - 1 // all but the last byte
			}
			if err := os.Truncate(firstSeg(dir), before+keep); err != nil {
				t.Fatal(err)
			}
			sums := storeSums(t, dir)
			ro, err := Open(dir, Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("read-only open of a torn tail: %v", err)
			}
			checkRecords(t, ro, 10)
			ro.Close()
			if !sameSums(sums, storeSums(t, dir)) {
				t.Fatal("a read-only open changed the store's files")
			}
			j := openT(t, dir, Options{})
			checkRecords(t, j, 10)
			if fi, _ := os.Stat(firstSeg(dir)); fi.Size() != before {
				t.Fatalf("segment is %d bytes after the cut, want %d", fi.Size(), before)
			}
			appendT(t, j, &Record{Op: OpUnlink, Parent: 1, Name: "after"})
			j.Close()
			j = openT(t, dir, Options{})
			checkRecords(t, j, 11)
		})
	}
}

func blobOf(s string) cas.Blob {
	return cas.Blob{Hash: cas.Sum([]byte(s)), Data: []byte(s)}
}

// killEnv makes the test binary a child that appends, and kills itself
// with SIGKILL at the fault point named by the variable's value.
const killEnv = "REYNFS_JOURNAL_KILL_AT"

// TestKillBetweenFrameAndIndex: kill -9 after a commit's frame is in the
// log but before its index write: the records are found on open (they
// were committed to the log, so the page cache kept them).
func TestKillBetweenFrameAndIndex(t *testing.T) {
	if at := os.Getenv(killEnv); at != "" {
		killChild(at)
		return
	}
	dir := filepath.Join(t.TempDir(), "db")
	runKillChild(t, dir, "index")
	j := openT(t, dir, Options{})
	checkRecords(t, j, 11) // ten synced, the eleventh's frame written
	if r, err := j.Get(11); err != nil || r.Name != "last" {
		t.Fatalf("seq 11 = %+v, %v", r, err)
	}
}

// killChild appends ten synced records, then one more whose commit kills
// the process between its frame write and its index write.
func killChild(at string) {
	dir := os.Getenv(crashEnv)
	var armed atomic.Bool
	armed.Store(at == "catchup") // dies in Open
	j, err := Open(dir, Options{Fault: func(op string) error {
		if armed.Load() && op == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kill child:", err)
		os.Exit(2)
	}
	if at == "catchup" {
		fmt.Fprintln(os.Stderr, "kill child: open did not stop at catch-up")
		os.Exit(2)
	}
	for i := range 10 {
		b := blobOf(fmt.Sprintf("data %d", i))
		if err := j.Enqueue(&Record{Op: OpData, Ino: 2, Size: uint64(len(b.Data)), Chunks: []Chunk{{0, b.Hash}}}, []cas.Blob{b}).Wait(); err != nil {
			fmt.Fprintln(os.Stderr, "kill child:", err)
			os.Exit(2)
		}
	}
	if err := j.Sync(); err != nil {
		os.Exit(2)
	}
	// The log's end, not the file's size: the segment is pre-written
	// with zeros past it (cas/prefill.go).
	fmt.Printf("size %d\n", j.objs.LogEnd().Off)
	armed.Store(true)
	b := blobOf("the last blob")
	_ = j.Enqueue(&Record{Op: OpCreate, Parent: 1, Ino: 9, Name: "last", Mode: 0o100644}, []cas.Blob{b}).Wait()
	os.Exit(3)
}

// TestSalvageKeepsTruncation: a Damaged open (fsck) reads the whole log
// for objects, but records Truncate dropped stay dropped.
func TestSalvageKeepsTruncation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	head := writeSome(t, dir, 10)
	j := openT(t, dir, Options{})
	if n, err := j.Truncate(6); err != nil || n != 5 {
		t.Fatalf("Truncate = %d, %v", n, err)
	}
	j.Close()
	ro, err := Open(dir, Options{ReadOnly: true, Damaged: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var seqs []uint64
	if err := ro.Iter(0, func(r *Record) error { seqs = append(seqs, r.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != int(head)-5 || seqs[0] != 6 {
		t.Fatalf("salvage sees seqs %v after truncating below 6", seqs)
	}
}
