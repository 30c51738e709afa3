package journal

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSyncOverlapsIndexWrite: an fsync's log sync starts once the batch's
// frame is written, while the committer still writes its index (the index
// write waits here for the sync to start; a Sync that waited for the index
// first would keep it waiting out the timeout), and Sync returns only after
// the index write, so the record reads back at once.
func TestSyncOverlapsIndexWrite(t *testing.T) {
	var armed, timedOut atomic.Bool
	syncStarted := make(chan struct{})
	var once sync.Once
	j := openT(t, t.TempDir(), Options{Fault: func(op string) error {
		if !armed.Load() {
			return nil
		}
		switch op {
		case "sync":
			once.Do(func() { close(syncStarted) })
		case "index":
			select {
			case <-syncStarted:
				time.Sleep(20 * time.Millisecond) // the sync is ahead of the index
			case <-time.After(3 * time.Second):
				timedOut.Store(true)
			}
		}
		return nil
	}})
	appendT(t, j, unlink("a"))
	armed.Store(true)
	r := unlink("b")
	p := j.Enqueue(r, nil)
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if timedOut.Load() {
		t.Fatal("the log sync waited for the index write")
	}
	if got, err := j.Get(r.Seq); err != nil || got.Name != "b" {
		t.Fatalf("Get(%d) right after Sync = %+v, %v", r.Seq, got, err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
}
