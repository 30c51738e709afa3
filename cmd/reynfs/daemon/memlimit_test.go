package daemon

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
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
