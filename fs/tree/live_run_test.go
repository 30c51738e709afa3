package tree

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// Records carry the run and agent of their caller; a run cancelled by a
// rewind gets nothing more into the journal, not even a request that was
// already waiting for the lock when the rewind took it.

func TestLiveRecordsCarryRun(t *testing.T) {
	l, j := newTestLive(t)
	coder := Caller{Pid: 7, Comm: "sh", Run: "r1", Agent: "coder", Uid: rootUid, Gid: rootGid}
	st, err := l.Create(coder, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteAt(coder, st.Ino, NoHandle, []byte("x\n"), 0, false); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(coder, st.Ino); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Mkdir(testCaller, RootIno, "d", 0o755); err != nil {
		t.Fatal(err)
	}
	// Written by the run, journaled by the daemon's periodic flush: the
	// record names the writer.
	if _, err := l.WriteAt(coder, st.Ino, NoHandle, []byte("y\n"), 2, false); err != nil {
		t.Fatal(err)
	}
	if err := l.FlushAll(Caller{}); err != nil {
		t.Fatal(err)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	var got []string
	err = j.Iter(1, func(r *journal.Record) error {
		got = append(got, r.Op.String()+":"+r.Comm+":"+r.Run+":"+r.Agent)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"create:sh:r1:coder", "data:sh:r1:coder", "mkdir:test::", "data:sh:r1:coder"}
	if len(got) != len(want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d is %s, want %s", i, got[i], want[i])
		}
	}
}

func TestLiveCancelledRunInFlight(t *testing.T) {
	l, j := newTestLive(t)
	doomed := Caller{Pid: 8, Comm: "loop", Run: "r1", Agent: "coder", Uid: rootUid, Gid: rootGid}
	other := Caller{Pid: 9, Comm: "vim", Run: "r2", Agent: "planner", Uid: rootUid, Gid: rootGid}
	st, err := l.Create(doomed, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Buffered before the cancel: the rewind's own flush journals it,
	// before its reset record.
	if _, err := l.WriteAt(doomed, st.Ino, NoHandle, []byte("early"), 0, false); err != nil {
		t.Fatal(err)
	}

	// The rewind holds the lock; requests of the run arrive meanwhile and
	// wait for it, as FUSE handlers would.
	l.Lock()
	type result struct {
		what string
		err  error
	}
	results := make(chan result, 4)
	go func() {
		_, err := l.Create(doomed, RootIno, "late", syscall.S_IFREG|0o644, 0)
		results <- result{"create", err}
	}()
	go func() {
		_, err := l.WriteAt(doomed, st.Ino, NoHandle, []byte("late"), 0, false)
		results <- result{"write", err}
	}()
	go func() {
		results <- result{"flush", l.Flush(doomed, st.Ino)}
	}()
	go func() {
		_, err := l.Mkdir(other, RootIno, "kept", 0o755)
		results <- result{"other", err}
	}()
	time.Sleep(20 * time.Millisecond) // let them reach the lock (not needed for the result)
	l.CancelRunsLocked([]string{"r1"})
	if err := l.FlushAllLocked(Caller{Comm: "reynfs-rewind"}); err != nil {
		t.Fatal(err)
	}
	// The reset record stands in for a rewind's: appended under the lock.
	marker := &journal.Record{Op: journal.OpAgentState, Label: "reset-marker", Root: cas.Hash{31: 1}}
	if err := j.Enqueue(marker, nil).Refused(); err != nil {
		t.Fatal(err)
	}
	l.Unlock()

	for range 4 {
		r := <-results
		switch {
		case r.what == "other" && r.err != nil:
			t.Errorf("a run not cancelled was refused: %v", r.err)
		case r.what == "flush" && r.err == nil:
			// Nothing left to flush: no record, nothing to refuse.
		case r.what != "other" && !errors.Is(r.err, ErrRunCancelled):
			t.Errorf("%s of the cancelled run: %v, want ErrRunCancelled", r.what, r.err)
		case r.what != "other" && !errors.Is(r.err, ErrStale):
			t.Errorf("%s of the cancelled run: %v does not wrap ErrStale (ESTALE)", r.what, r.err)
		}
	}
	// Whoever flushes later finds nothing of the cancelled run's.
	if err := l.Sync(testCaller); err != nil {
		t.Fatal(err)
	}
	after, sawOther := false, false
	err = j.Iter(1, func(r *journal.Record) error {
		if r.Label == "reset-marker" {
			after = true
		}
		if after && r.Run == "r1" {
			t.Errorf("record %d (%s) of the cancelled run after the reset", r.Seq, r.Op)
		}
		if after && r.Op == journal.OpData && r.Ino == st.Ino {
			t.Errorf("record %d writes the cancelled run's file after the reset", r.Seq)
		}
		sawOther = sawOther || (after && r.Run == "r2" && r.Agent == "planner")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sawOther {
		t.Error("the other run's mkdir is not journaled after the reset with its run and agent")
	}
	buf := make([]byte, 16)
	if k, err := l.ReadAt(st.Ino, buf, 0); err != nil || string(buf[:k]) != "early" {
		t.Errorf("file holds %q, %v; want the write from before the cancel only", buf[:k], err)
	}
}
