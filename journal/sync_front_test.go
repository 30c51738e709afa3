package journal

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// inSync reports whether the calling goroutine runs inside Journal.Sync.
func inSync() bool { return onStack("journal.(*Journal).Sync(") }

// onStack reports whether the calling goroutine's stack holds frame (a
// function name and its opening parenthesis, as runtime.Stack prints it).
func onStack(frame string) bool {
	buf := make([]byte, 16<<10)
	return strings.Contains(string(buf[:runtime.Stack(buf, false)]), frame)
}

// TestSyncAppendsItself: a Sync that finds its batch queued and the
// committer idle appends the frame on its own goroutine (no hand-off to
// the committer and back before the fdatasync), and leaves the index to
// the committer, so that the fdatasync runs while the index is written.
// Enqueue wakes the committer too, which may win the race for a batch now
// and then; over 50 fsyncs the Sync must append at least one itself.
func TestSyncAppendsItself(t *testing.T) {
	var commitsInSync, indexesInSync atomic.Int32
	j := openT(t, t.TempDir(), Options{Fault: func(op string) error {
		switch op {
		case "commit":
			if inSync() {
				commitsInSync.Add(1)
			}
		case "index":
			if inSync() {
				indexesInSync.Add(1)
			}
		}
		return nil
	}})
	for i := 0; i < 50; i++ {
		r := unlink(fmt.Sprint("f", i))
		p := j.Enqueue(r, nil)
		if err := j.Sync(); err != nil {
			t.Fatal(err)
		}
		// Sync returned: the record reads back from the index at once.
		if got, err := j.Get(r.Seq); err != nil || got.Name != r.Name {
			t.Fatalf("Get(%d) right after Sync = %+v, %v", r.Seq, got, err)
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if commitsInSync.Load() == 0 {
		t.Error("no Sync appended its own batch: every fsync waited for the committer")
	}
	if n := indexesInSync.Load(); n != 0 {
		t.Errorf("%d index writes ran inside Sync, ahead of its fdatasync", n)
	}
}

// TestSyncAppendedIndexFails: when the index write of a frame a Sync
// appended fails, the Sync and every waiter of the batch get ErrFailed,
// and the journal stays failed.
func TestSyncAppendedIndexFails(t *testing.T) {
	var broken atomic.Bool
	boom := errors.New("index on fire")
	j := openT(t, t.TempDir(), Options{Fault: func(op string) error {
		if op == "index" && broken.Load() {
			return boom
		}
		return nil
	}})
	appendT(t, j, unlink("a"))
	broken.Store(true)
	p := j.Enqueue(unlink("b"), nil)
	if err := j.Sync(); !errors.Is(err, ErrFailed) || !errors.Is(err, boom) {
		t.Fatalf("Sync = %v, want ErrFailed and the cause", err)
	}
	if err := p.Wait(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Wait = %v, want ErrFailed", err)
	}
	if err := j.Enqueue(unlink("c"), nil).Wait(); !errors.Is(err, ErrFailed) {
		t.Errorf("Enqueue after the failure = %v", err)
	}
}

// TestConcurrentSyncs: writers that each enqueue and sync, concurrently,
// while the Syncs and the committer take turns appending; every record is
// readable after its Sync, stored once, and all of them are there, in seq
// order, after a reopen. Fewer log syncs than Syncs may run (concurrent
// fsyncs share a flush), never more.
func TestConcurrentSyncs(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, Options{})
	const writers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r := unlink(fmt.Sprintf("w%d-%d", w, i))
				j.Enqueue(r, nil)
				if err := j.Sync(); err != nil {
					errs <- err
					return
				}
				if got, err := j.Get(r.Seq); err != nil || got.Name != r.Name {
					errs <- fmt.Errorf("Get(%d) after Sync = %+v, %v", r.Seq, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := j.Stats()
	if st.Records != writers*each || st.Syncs > writers*each {
		t.Errorf("stats %+v: want %d records and at most as many syncs", st, writers*each)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openT(t, dir, Options{})
	names := map[string]bool{}
	var last uint64
	if err := j.Iter(1, func(r *Record) error {
		if r.Seq <= last {
			return fmt.Errorf("seq %d after %d", r.Seq, last)
		}
		last = r.Seq
		names[r.Name] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(names) != writers*each {
		t.Errorf("%d records after reopen, want %d", len(names), writers*each)
	}
}

// TestEnqueueSyncingLeavesCommitterAsleep: a record queued with
// EnqueueSyncing does not wake the committer, so the Sync that follows
// appends every batch itself (with Enqueue the committer wakes and takes
// one now and then); a record queued so is still committed when nobody
// syncs: by Pending.Wait, by a Sync that cannot append itself (a reset
// record in the batch), and by Close.
func TestEnqueueSyncingLeavesCommitterAsleep(t *testing.T) {
	var commits, commitsInSync atomic.Int32
	dir := t.TempDir()
	j := openT(t, dir, Options{Fault: func(op string) error {
		if op == "commit" {
			commits.Add(1)
			if inSync() {
				commitsInSync.Add(1)
			}
		}
		return nil
	}})
	const rounds = 100
	for i := 0; i < rounds; i++ {
		time.Sleep(time.Millisecond)
		p := j.EnqueueSyncing(unlink(fmt.Sprint("f", i)), nil)
		if err := p.Refused(); err != nil {
			t.Fatal(err)
		}
		// Time for a committer that was woken to take the batch (the
		// committer may still be ending the last batch when the next
		// one is queued: then it takes it, woken or not, so first let
		// it go back to sleep).
		time.Sleep(time.Millisecond)
		if err := j.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	// Nearly all: a batch queued while the committer ends the one
	// before still goes to it. Enqueue lets it take nearly every one.
	if got := commitsInSync.Load(); got < rounds*9/10 {
		t.Errorf("%d of %d batches appended by their Sync: the committer took the rest", got, rounds)
	}

	// Waited for without a Sync: Wait wakes the committer.
	p := j.EnqueueSyncing(unlink("waited"), nil)
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	// A reset record in the batch: the committer appends it, woken by Sync.
	q := j.EnqueueSyncing(unlink("beside a reset"), nil)
	appendResetQuiet(t, j)
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := q.Wait(); err != nil {
		t.Fatal(err)
	}
	// Queued and then closed: Close commits it.
	last := j.EnqueueSyncing(unlink("at close"), nil)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := last.Wait(); err != nil {
		t.Fatal(err)
	}
	j2 := openT(t, dir, Options{})
	if got, err := j2.Get(last.Seq()); err != nil || got.Name != "at close" {
		t.Fatalf("after reopen, Get(%d) = %+v, %v", last.Seq(), got, err)
	}
}

// appendResetQuiet queues a reset record with EnqueueSyncing.
func appendResetQuiet(t *testing.T, j *Journal) {
	t.Helper()
	r := &Record{Op: OpReset, ResetTo: 1}
	if err := j.EnqueueSyncing(r, nil).Refused(); err != nil {
		t.Fatal(err)
	}
}
