package daemon

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestLimitMemoryFollowsLiveHeap: the limit rises to one and a half times
// a live heap above the floor (a fixed limit below it made the collector
// run without pause) and falls back once that heap is gone.
func TestLimitMemoryFollowsLiveHeap(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	const floor = 8 << 20
	stop := LimitMemory(floor)
	t.Cleanup(func() {
		stop()
		debug.SetMemoryLimit(old)
	})
	// The limit starts at the floor, or above it for what the package's
	// other tests left live in this process (16 MiB: a buffer of Badger's
	// table builder and the segment log's zeros for its prefill).
	runtime.GC()
	base := debug.SetMemoryLimit(-1)
	if base < floor {
		t.Fatalf("limit %d at start, below the floor %d", base, floor)
	}
	live := make([][]byte, 96)
	for i := range live {
		live[i] = make([]byte, 1<<20)
		live[i][0] = 1
	}
	waitLimit(t, "with 96 MiB live", func(l int64) bool { return l >= base+96<<20*14/10 })
	runtime.KeepAlive(live)
	live = nil
	waitLimit(t, "once the 96 MiB are garbage", func(l int64) bool { return l < base+48<<20 })
}

// waitLimit collects until the limit satisfies ok, for up to 10 s (the
// tuner runs on the finalizer goroutine after a collection).
func waitLimit(t *testing.T, when string, ok func(int64) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		l := debug.SetMemoryLimit(-1)
		if ok(l) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("limit %d MiB %s", l>>20, when)
		}
	}
}

// TestMemReturnerReturnsFreePages: after a return the pages a collection
// freed are the system's again; the runtime otherwise keeps them for the
// heap to grow into (the background scavenger gives back about a MiB a
// second at most; the daemon after five rewinds at 100k files held 60-80
// MiB so).
func TestMemReturnerReturnsFreePages(t *testing.T) {
	runs := make(chan time.Duration, 1)
	r := &memReturner{log: zerolog.Nop(), quiet: time.Millisecond, done: func(d time.Duration) { runs <- d }}
	garbage := make([][]byte, 64)
	for i := range garbage {
		garbage[i] = make([]byte, 1<<20)
		garbage[i][0] = 1
	}
	runtime.KeepAlive(garbage)
	garbage = nil
	runtime.GC()
	before := heapFree()
	r.after("test")
	<-runs
	if free := heapFree(); free > 16<<20 {
		t.Fatalf("%d MiB of free heap pages kept after a return (%d MiB before it)", free>>20, before>>20)
	}
}

// TestMemReturnerFolds: requests made while a return runs make one more
// run after it, not one each.
func TestMemReturnerFolds(t *testing.T) {
	var n atomic.Int32
	first, release := make(chan struct{}), make(chan struct{})
	r := &memReturner{log: zerolog.Nop(), quiet: time.Millisecond, done: func(time.Duration) {
		if n.Add(1) == 1 {
			close(first)
			<-release
		}
	}}
	r.after("one")
	<-first // the first run is in progress
	r.after("two")
	r.after("three")
	close(release)
	for {
		r.mu.Lock()
		running := r.running
		r.mu.Unlock()
		if !running {
			break
		}
		runtime.Gosched()
	}
	if got := n.Load(); got != 2 {
		t.Fatalf("%d runs for three requests, two of them during the first; want 2", got)
	}
}

// TestMemReturnerWaitsForQuiet: requests that keep coming (a burst of
// rewinds) hold the return off until they stop: one return, after the
// last of them and its quiet, not one per request whose pages the next
// request faults in again.
func TestMemReturnerWaitsForQuiet(t *testing.T) {
	var n atomic.Int32
	ran := make(chan time.Time, 8)
	r := &memReturner{log: zerolog.Nop(), quiet: time.Second, done: func(time.Duration) {
		n.Add(1)
		ran <- time.Now()
	}}
	var last time.Time
	for range 20 {
		last = time.Now()
		r.after("burst")
		time.Sleep(20 * time.Millisecond)
	}
	if got := n.Load(); got != 0 {
		t.Fatalf("%d returns during a burst of requests 20 ms apart (quiet 1 s); want none", got)
	}
	at := <-ran
	if d := at.Sub(last); d < r.quiet {
		t.Errorf("the return ran %v after the last request, before its quiet of %v", d, r.quiet)
	}
	time.Sleep(2 * r.quiet)
	if got := n.Load(); got != 1 {
		t.Fatalf("%d returns for one burst; want 1", got)
	}
}

// heapFree is what the runtime keeps of the heap's free pages, resident.
func heapFree() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestMemReturnerLeavesLimitedHeap: a heap whose collector goal is above
// the memory limit (a million-file tree) is left to the limit: no full
// collection after its rewinds.
func TestMemReturnerLeavesLimitedHeap(t *testing.T) {
	live := make([]byte, 32<<20)
	live[0] = 1
	runtime.GC()
	old := debug.SetMemoryLimit(48 << 20) // below live + live*GOGC/100
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	var n atomic.Int32
	r := &memReturner{log: zerolog.Nop(), done: func(time.Duration) { n.Add(1) }}
	r.after("test")
	r.mu.Lock()
	running := r.running
	r.mu.Unlock()
	if running || n.Load() != 0 {
		t.Fatal("a return ran for a heap the limit holds")
	}
	runtime.KeepAlive(live)
}
