package cas

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// smallPrefill makes segments and their prefill small, so that tests
// roll and refill often.
func smallPrefill(t *testing.T) {
	t.Helper()
	seg, ahead, step := segmentSize, prefillAhead, prefillStep
	t.Cleanup(func() { segmentSize, prefillAhead, prefillStep = seg, ahead, step })
	segmentSize, prefillAhead, prefillStep = 1<<20, 256<<10, 64<<10
}

func noisy(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// zeroTail returns how many zero bytes end the file at path.
func zeroTail(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(b) - len(bytes.TrimRight(b, "\x00")))
}

// waitFilled waits until the active segment is pre-written to want bytes.
func waitFilled(t *testing.T, s *Badger, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.log.fill.filled.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("prefill reached %d bytes in 10 s, want %d", s.log.fill.filled.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPrefill: commits land in pre-written zeros (the segment's size does
// not move with them), objects read back across rolls, a sealed segment
// and a closed store hold no zero tail, and a reopen (clean or after a
// crash left the zeros) finds every object and no torn tail.
func TestPrefill(t *testing.T) {
	smallPrefill(t)
	dir := t.TempDir()
	s, db := openTestLog(t, dir)
	logDir := filepath.Join(dir, "db.log")
	data := map[Hash][]byte{}
	put := func(i int) {
		d := noisy(uint64(i), 20<<10)
		h, err := s.Put(d)
		if err != nil {
			t.Fatal(err)
		}
		data[h] = d
	}
	put(0)
	if err := s.SyncLog(); err != nil { // the prefill runs while the log is synced
		t.Fatal(err)
	}
	waitFilled(t, s, prefillAhead)
	filled := s.log.fill.filled.Load()
	put(1)
	if end := s.LogEnd().Off; end > filled {
		t.Fatalf("a commit after the prefill ends at %d, past the pre-written %d", end, filled)
	}
	for i := 2; i < 200; i++ {
		put(i)
	}
	if err := s.SyncLog(); err != nil {
		t.Fatal(err)
	}
	segs, err := listSegments(logDir)
	if err != nil || len(segs) < 3 {
		t.Fatalf("segments %v (%v), want several", segs, err)
	}
	for _, n := range segs[:len(segs)-1] {
		if z := zeroTail(t, s.log.path(n)); z > 64 {
			t.Errorf("sealed segment %d ends in %d zero bytes", n, z)
		}
	}
	check := func(s *Badger, when string) {
		t.Helper()
		for h, d := range data {
			got, err := s.Get(h)
			if err != nil || !bytes.Equal(got, d) {
				t.Fatalf("%s: %s: %v", when, h.Short(), err)
			}
		}
	}
	check(s, "open")

	// The index forgets its position and the zeros stay (as a crash
	// leaves them): the reopen replays the log and takes them for its end.
	s.log.fill.mu.Lock()
	s.log.fill.closed = true // keep the zero tail at close
	s.log.fill.mu.Unlock()
	_ = s.CloseLog()
	_ = db.Close()
	last := s.log.path(segs[len(segs)-1])
	if z := zeroTail(t, last); z == 0 {
		t.Fatal("no zero tail left to test the reopen with")
	}
	s, db = openTestLog(t, dir)
	check(s, "reopened over a zero tail")
	put(1000)
	_ = s.CloseLog()
	_ = db.Close()
	segs, _ = listSegments(logDir)
	for _, n := range segs {
		if z := zeroTail(t, s.log.path(n)); z > 64 {
			t.Errorf("closed store: segment %d ends in %d zero bytes", n, z)
		}
	}
	s, db = openTestLog(t, dir)
	defer func() { _ = s.CloseLog(); _ = db.Close() }()
	check(s, "reopened after a clean close")
}

// TestScanZeroTail: zeros after the last frame are the clean end (no torn
// tail), a torn frame followed by zeros is a torn tail that a writable
// open cuts, and a bad frame followed by zeros and then an intact frame
// is damage.
func TestScanZeroTail(t *testing.T) {
	prep := func(t *testing.T) (dir, seg string, end int64) {
		dir = t.TempDir()
		s, db := openTestLog(t, dir)
		for i := range 3 {
			if _, err := s.Put(noisy(uint64(i), 3000)); err != nil {
				t.Fatal(err)
			}
			// Synced: each frame's mark says the one before it
			// was, so zeros over it are damage (powercut_test.go
			// has the unsynced cases).
			if err := s.SyncLog(); err != nil {
				t.Fatal(err)
			}
		}
		end = s.LogEnd().Off
		seg = s.log.path(s.LogEnd().Seg)
		_ = s.CloseLog()
		_ = db.Close()
		return dir, seg, end
	}
	scan := func(t *testing.T, dir string) scanResult {
		l, err := openSegLog(filepath.Join(dir, "db.log"), testID, true, false)
		if err != nil {
			t.Fatal(err)
		}
		defer l.close()
		res, err := l.scan(Pos{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	t.Run("clean", func(t *testing.T) {
		dir, seg, end := prep(t)
		if err := os.Truncate(seg, end+1<<20); err != nil {
			t.Fatal(err)
		}
		res := scan(t, dir)
		if res.cut || res.damage != nil || res.end.Off != end || len(res.frames) != 3 {
			t.Fatalf("scan: end %v cut %v damage %v frames %d; want end %d, 3 frames", res.end, res.cut, res.damage, len(res.frames), end)
		}
	})
	t.Run("torn", func(t *testing.T) {
		dir, seg, end := prep(t)
		b, _ := os.ReadFile(seg)
		prev := scan(t, dir).frames[2].at.Off
		// The last frame's first half, then zeros.
		half := append(bytes.Clone(b[:prev+(end-prev)/2]), make([]byte, 1<<20)...)
		if err := os.WriteFile(seg, half, 0o600); err != nil {
			t.Fatal(err)
		}
		res := scan(t, dir)
		if !res.cut || res.damage != nil || res.end.Off != prev {
			t.Fatalf("scan: end %v cut %v damage %v; want a cut at %d", res.end, res.cut, res.damage, prev)
		}
		// A crash tore the frame before its index write: the index
		// does not cover it.
		db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")).WithLogger(nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(txn *badger.Txn) error { return txn.Set(KeyLogPos, Pos{1, prev}.encode()) }); err != nil {
			t.Fatal(err)
		}
		_ = db.Close()
		s, db := openTestLog(t, dir) // cuts
		_ = s.CloseLog()
		_ = db.Close()
		if fi, _ := os.Stat(seg); fi.Size() != prev {
			t.Fatalf("after the cut the segment is %d bytes, want %d", fi.Size(), prev)
		}
	})
	t.Run("damage", func(t *testing.T) {
		dir, seg, end := prep(t)
		b, _ := os.ReadFile(seg)
		fr := scan(t, dir).frames
		// Zeros over the second frame, the third intact after them.
		clear(b[fr[1].at.Off:fr[1].end])
		if err := os.WriteFile(seg, append(b[:end], make([]byte, 4096)...), 0o600); err != nil {
			t.Fatal(err)
		}
		if res := scan(t, dir); res.damage == nil {
			t.Fatalf("scan of zeros before an intact frame: end %v cut %v, no damage", res.end, res.cut)
		}
	})
}

const (
	prefillKillEnv = "REYNFS_PREFILL_KILL_AT"
	prefillDirEnv  = "REYNFS_PREFILL_KILL_DIR"
)

// TestPrefillKill SIGKILLs the writer at the prefill's fault points: zeros
// written but not synced ("prefill"), a new segment created and the old
// one's prefill cut, before the writer moved to it ("roll"), and half a
// frame written into pre-written space ("frame"). Every object whose
// sync returned reads back after the reopen, the log shows no damage,
// and writing goes on.
func TestPrefillKill(t *testing.T) {
	if at := os.Getenv(prefillKillEnv); at != "" {
		prefillKillChild(t, at, os.Getenv(prefillDirEnv))
		return
	}
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	smallPrefill(t)
	for _, at := range []string{"prefill", "roll", "frame"} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			synced := runPrefillKill(t, dir, at)
			if len(synced) < 5 {
				t.Fatalf("child synced only %d objects before the kill", len(synced))
			}
			s, db := openTestLog(t, dir)
			defer func() { _ = s.CloseLog(); _ = db.Close() }()
			for i, h := range synced {
				got, err := s.Get(h)
				if err != nil || Sum(got) != h {
					t.Fatalf("killed at %s: synced object %d %s: %v", at, i, h.Short(), err)
				}
			}
			d := noisy(99999, 30<<10)
			h, err := s.Put(d)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := s.Get(h); err != nil || !bytes.Equal(got, d) {
				t.Fatalf("a write after the reopen: %v", err)
			}
		})
	}
}

// runPrefillKill runs the child and returns the objects it synced.
func runPrefillKill(t *testing.T, dir, at string) []Hash {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPrefillKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), prefillKillEnv+"="+at, prefillDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	var synced []Hash
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "synced "); ok {
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != len(Hash{}) {
				t.Fatalf("child said %q", sc.Text())
			}
			var h Hash
			copy(h[:], b)
			synced = append(synced, h)
		}
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL at %s: %v", at, err)
	}
	return synced
}

// prefillKillChild writes and syncs objects until the fault point at,
// armed after the first few, kills it.
func prefillKillChild(t *testing.T, at, dir string) {
	smallPrefill(t)
	s, _ := openTestLog(t, dir)
	var armed atomic.Bool
	s.SetFault(func(op string) error {
		if armed.Load() && op == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	})
	for i := range 2000 {
		armed.Store(i >= 5)
		h, err := s.Put(noisy(uint64(i)+1, 10<<10+i))
		if err != nil {
			fmt.Fprintln(os.Stderr, "prefill kill child:", err)
			os.Exit(2)
		}
		if err := s.SyncLog(); err != nil {
			fmt.Fprintln(os.Stderr, "prefill kill child:", err)
			os.Exit(2)
		}
		fmt.Printf("synced %x\n", h[:])
	}
	fmt.Fprintln(os.Stderr, "prefill kill child: never reached", at)
	os.Exit(3)
}

// TestPrefillWholeSteps: once the prefill is ahead, the small frames of
// fsync'd writes land in it without the segment growing: a round after
// each sync writes nothing until a whole step is missing (a top-up by one
// frame's bytes grew the file at every fsync, a file-system metadata
// commit each time), and then writes a whole step.
func TestPrefillWholeSteps(t *testing.T) {
	smallPrefill(t)
	dir := t.TempDir()
	s, db := openTestLog(t, dir)
	defer func() { _ = s.CloseLog(); _ = db.Close() }()
	var steps atomic.Int64
	s.SetFault(func(op string) error {
		if op == "prefill" {
			steps.Add(1)
		}
		return nil
	})
	if _, err := s.Put(noisy(0, 1<<10)); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncLog(); err != nil {
		t.Fatal(err)
	}
	waitFilled(t, s, prefillAhead)
	f, err := s.log.file(s.log.activeA.Load())
	if err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		t.Helper()
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	filled, before, stepsBefore := s.log.fill.filled.Load(), size(), steps.Load()
	start := s.LogEnd().Off
	i := 1
	for s.LogEnd().Off-start < prefillStep/2 {
		if _, err := s.Put(noisy(uint64(i), 1<<10)); err != nil {
			t.Fatal(err)
		}
		if err := s.SyncLog(); err != nil {
			t.Fatal(err)
		}
		// A round now, as the sync's kick would run one.
		if _, err := s.log.fillStep(); err != nil {
			t.Fatal(err)
		}
		i++
	}
	if got := size(); got != before || steps.Load() != stepsBefore {
		t.Fatalf("%d fsync'd frames of 1 KiB (%d bytes of log) grew the segment from %d to %d bytes in %d prefill steps; want no step until %d bytes are missing",
			i-1, s.LogEnd().Off-start, before, got, steps.Load()-stepsBefore, prefillStep)
	}
	for s.LogEnd().Off-start <= prefillStep {
		if _, err := s.Put(noisy(uint64(i), 1<<10)); err != nil {
			t.Fatal(err)
		}
		i++
	}
	if err := s.SyncLog(); err != nil {
		t.Fatal(err)
	}
	waitFilled(t, s, filled+prefillStep)
}

// TestPrefillZerosOffHeap: a prefill step's zeros come from the binary's
// zero block, not from a heap buffer the size of the step (8 MiB of a
// daemon's live heap, as it was).
func TestPrefillZerosOffHeap(t *testing.T) {
	const n = 8<<20 + 5
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	parts := zeros(n)
	runtime.ReadMemStats(&m1)
	if grew := m1.TotalAlloc - m0.TotalAlloc; grew > 64<<10 {
		t.Fatalf("zeros(%d) allocated %d bytes on the heap", n, grew)
	}
	total := 0
	for _, p := range parts {
		total += len(p)
		if !bytes.Equal(p, make([]byte, len(p))) {
			t.Fatal("zeros holds a byte that is not zero")
		}
	}
	if total != n {
		t.Fatalf("zeros(%d) is %d bytes", n, total)
	}
}

// TestPrefillSyncWakesOnlyWhenShort: an fsync's log sync wakes the
// prefill goroutine only when the space ahead is a step short; while it
// is not (the usual fsync: a few KiB into 16 MiB of zeros), no goroutine
// is woken to find nothing to do (before, every sync woke it). Once the
// frames have eaten a step, a sync wakes it and it tops the space up.
func TestPrefillSyncWakesOnlyWhenShort(t *testing.T) {
	smallPrefill(t)
	s, db := openTestLog(t, t.TempDir())
	defer func() { _ = s.CloseLog(); _ = db.Close() }() // the prefill goroutine ends before smallPrefill's cleanup
	if _, err := s.Put(noisy(1, 4<<10)); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncLog(); err != nil {
		t.Fatal(err)
	}
	waitFilled(t, s, prefillAhead)
	before := s.log.fill.wakes.Load()
	// 8 x 4 KiB: well under a step (64 KiB here) of the space ahead.
	for i := 2; i < 10; i++ {
		if _, err := s.Put(noisy(uint64(i), 4<<10)); err != nil {
			t.Fatal(err)
		}
		if err := s.SyncLog(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond) // a kicked goroutine would have counted by now
	if n := s.log.fill.wakes.Load() - before; n != 0 {
		t.Errorf("%d prefill wake-ups for 8 syncs that left the space ahead less than a step short", n)
	}
	// Past a step: the sync wakes it, and the space is topped up.
	filled := s.log.fill.filled.Load()
	for i := 10; s.LogEnd().Off+prefillAhead-filled < prefillStep; i++ {
		if _, err := s.Put(noisy(uint64(i), 16<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SyncLog(); err != nil {
		t.Fatal(err)
	}
	waitFilled(t, s, filled+prefillStep)
}
