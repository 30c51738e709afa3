package journal

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// TestOnDone: a callback runs once, after the commit it waits for, with
// what Wait returns; at once for a commit already over or a record
// refused; and registering one does not wake the committer for a record
// EnqueueSyncing queued (the Sync that follows appends it).
func TestOnDone(t *testing.T) {
	var commitsInSync atomic.Int32
	j := openT(t, t.TempDir(), Options{Fault: func(op string) error {
		if op == "commit" && inSync() {
			commitsInSync.Add(1)
		}
		return nil
	}})

	// A record EnqueueSyncing queued is appended by its Sync: OnDone
	// does not wake the committer (as Wait does). Nearly always: the
	// committer still ending the batch before takes the next one
	// (TestEnqueueSyncingLeavesCommitterAsleep).
	const rounds = 40
	var p *Pending
	for i := 0; i < rounds; i++ {
		time.Sleep(time.Millisecond)
		calls := make(chan struct{}, 2)
		p = j.EnqueueSyncing(unlink(fmt.Sprint("a", i)), nil)
		p.OnDone(func(err error) {
			if err != nil {
				t.Errorf("callback got %v", err)
			}
			calls <- struct{}{}
		})
		time.Sleep(time.Millisecond)
		if err := j.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatal("callback never ran")
		}
		select {
		case <-calls:
			t.Fatal("callback ran twice")
		default:
		}
	}
	if got := commitsInSync.Load(); got < rounds*9/10 {
		t.Errorf("%d of %d batches appended by their Sync: the committer took the rest", got, rounds)
	}

	// Over already: on the caller's goroutine, before OnDone returns.
	ran := false
	p.OnDone(func(err error) {
		if err != nil {
			t.Errorf("late callback got %v", err)
		}
		ran = true
	})
	if !ran {
		t.Error("OnDone of an ended commit did not run its callback at once")
	}

	// Enqueued the usual way: runs after the commit, with its error.
	q := j.Enqueue(unlink("b"), nil)
	done := make(chan error, 1)
	q.OnDone(func(err error) { done <- err })
	if err := q.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Refused: the error, at once.
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	var got error
	j.Enqueue(unlink("c"), nil).OnDone(func(err error) { got = err })
	if !errors.Is(got, ErrClosed) {
		t.Fatalf("refused record's callback got %v, want ErrClosed", got)
	}
}
