package journal

import (
	"errors"
	"sync/atomic"
	"testing"
)

// inWaitLogged reports whether the calling goroutine runs inside
// Pending.WaitLogged.
func inWaitLogged() bool { return onStack("journal.(*Pending).WaitLogged(") }

// TestWaitLoggedBeforeIndex: WaitLogged of a quietly queued record
// appends the batch on its own goroutine (the committer is idle) and
// returns with the frame in the log while its index is still held back;
// Wait returns only after the index, when the record reads back. No
// index write runs inside WaitLogged.
func TestWaitLoggedBeforeIndex(t *testing.T) {
	var gated, indexInWait, commitInWait atomic.Bool
	indexing := make(chan struct{}, 1)
	release := make(chan struct{})
	j := openT(t, t.TempDir(), Options{Fault: func(op string) error {
		switch {
		case op == "commit" && inWaitLogged():
			commitInWait.Store(true)
		case op == "index" && inWaitLogged():
			indexInWait.Store(true)
		case op == "index" && gated.Load():
			indexing <- struct{}{}
			<-release
		}
		return nil
	}})
	appendT(t, j, unlink("a"))
	gated.Store(true)
	r := unlink("b")
	p := j.EnqueueSyncing(r, nil)
	if err := p.WaitLogged(); err != nil {
		t.Fatal(err)
	}
	<-indexing // the committer writes the index, held back
	gated.Store(false)
	if !commitInWait.Load() {
		t.Error("WaitLogged did not append the batch itself with the committer idle")
	}
	close(release)
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if got, err := j.Get(r.Seq); err != nil || got.Name != r.Name {
		t.Fatalf("Get(%d) after Wait = %+v, %v", r.Seq, got, err)
	}
	if indexInWait.Load() {
		t.Error("an index write ran inside WaitLogged")
	}
}

// TestWaitLoggedFailed: a record whose commit fails before its frame is
// in the log gets the commit's error from WaitLogged, as from Wait.
func TestWaitLoggedFailed(t *testing.T) {
	var broken atomic.Bool
	boom := errors.New("log on fire")
	j := openT(t, t.TempDir(), Options{Fault: func(op string) error {
		if op == "commit" && broken.Load() {
			return boom
		}
		return nil
	}})
	appendT(t, j, unlink("a"))
	broken.Store(true)
	p := j.Enqueue(unlink("b"), nil)
	if err := p.WaitLogged(); !errors.Is(err, ErrFailed) || !errors.Is(err, boom) {
		t.Fatalf("WaitLogged = %v, want ErrFailed and the cause", err)
	}
	if err := p.Wait(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Wait = %v, want ErrFailed", err)
	}
}
