package journal

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas"
)

// crashEnv switches the test binary into the crash child: it appends to the
// store in that directory until it is killed.
const crashEnv = "REYNFS_JOURNAL_CRASH_DIR"

// TestCrash SIGKILLs a child process that is appending and syncing, then
// checks what a restart finds: every seq the child saw synced, no seq gap,
// every record's blobs, the reset index, and no seq reissued. Three rounds
// run on the same store.
func TestCrash(t *testing.T) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("crash test re-executes the test binary")
	}
	dir := t.TempDir()
	var high uint64 // highest seq present after the previous round
	for round := range 3 {
		start, synced := runAndKill(t, dir, 40+round*60)
		if start != high+1 {
			t.Fatalf("round %d: child started at seq %d, want %d (seqs reissued or skipped)", round, start, high+1)
		}
		high = checkAfterCrash(t, dir, synced)
		t.Logf("round %d: %d syncs reported, highest synced %d, highest present %d",
			round, len(synced), synced[len(synced)-1], high)
	}
}

// runAndKill starts the child, reads synced seqs until it has seen n of
// them, then kills it with SIGKILL.
func runAndKill(t *testing.T, dir string, n int) (start uint64, synced []uint64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrash$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for len(synced) < n && sc.Scan() {
		word, num, ok := strings.Cut(sc.Text(), " ")
		v, perr := strconv.ParseUint(num, 10, 64)
		if !ok || perr != nil {
			continue // test framework output
		}
		switch word {
		case "start":
			start = v
		case "synced":
			synced = append(synced, v)
		}
	}
	// Let it run a little past the last report so the kill lands mid-batch.
	time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if len(synced) < n {
		t.Fatalf("child stopped after %d syncs (scan error %v)", len(synced), sc.Err())
	}
	return start, synced
}

func checkAfterCrash(t *testing.T, dir string, synced []uint64) uint64 {
	t.Helper()
	j := openT(t, dir, Options{})
	defer j.Close()
	for _, s := range synced {
		if _, err := j.Get(s); err != nil {
			t.Fatalf("seq %d was reported synced: %v", s, err)
		}
	}
	var next uint64 = 1
	var resets []uint64
	err := j.Iter(0, func(r *Record) error {
		if r.Seq != next {
			return fmt.Errorf("seq %d follows %d: a gap", r.Seq, next-1)
		}
		next++
		for _, c := range r.Chunks {
			if ok, err := j.Objects().Has(c.Hash); err != nil || !ok {
				return fmt.Errorf("seq %d names blob %s, which is not stored (%v)", r.Seq, c.Hash.Short(), err)
			}
		}
		if r.Op == OpReset {
			resets = append(resets, r.Seq)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	high := next - 1
	if high != j.Head() || high < synced[len(synced)-1] {
		t.Fatalf("highest present %d, head %d, highest synced %d", high, j.Head(), synced[len(synced)-1])
	}
	rs, err := j.Resets()
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(resets) {
		t.Fatalf("reset index has %d entries, journal %d resets", len(rs), len(resets))
	}
	for i, r := range rs {
		if r.Seq != resets[i] {
			t.Fatalf("reset index entry %d is seq %d, journal has %d", i, r.Seq, resets[i])
		}
	}
	return high
}

// crashChild appends from four goroutines, syncing after every fifth record
// of each and printing the seq it synced, until it is killed (or a minute
// passes, should the parent be gone).
func crashChild(dir string) {
	j, err := Open(dir, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	fmt.Printf("start %d\n", j.Head()+1)
	var order, print sync.Mutex
	deadline := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				data := make([]byte, 4096+rand.IntN(60000))
				for k := range data {
					data[k] = byte(rand.Uint32())
				}
				b := cas.Blob{Hash: cas.Sum(data), Data: data}
				r := &Record{Op: OpData, Ino: uint64(w + 2), Size: uint64(len(data)), Chunks: []Chunk{{0, b.Hash}}}
				order.Lock()
				if w == 0 && i%7 == 6 {
					r = &Record{Op: OpReset, ResetTo: j.Head() / 2}
				}
				p := j.Enqueue(r, []cas.Blob{b})
				order.Unlock()
				if err := p.Wait(); err != nil {
					fmt.Fprintln(os.Stderr, "crash child:", err)
					os.Exit(2)
				}
				if i%5 != 4 {
					continue
				}
				if err := j.Sync(); err != nil {
					fmt.Fprintln(os.Stderr, "crash child:", err)
					os.Exit(2)
				}
				print.Lock()
				fmt.Printf("synced %d\n", p.Seq())
				print.Unlock()
			}
		}()
	}
	wg.Wait()
	os.Exit(0)
}
