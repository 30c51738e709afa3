package daemon

import (
	"bytes"
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// TestFlushLogFullDisk: the periodic flush on a full disk (a real live
// tree and journal, the free space made zero) fails every second; three
// minutes of it log the first failure and one line a minute, not 180, and
// the recovery once.
func TestFlushLogFullDisk(t *testing.T) {
	s := newTestService(t)
	st, err := s.Live.Create(tree.Caller{}, tree.RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Live.WriteAt(tree.Caller{}, st.Ino, tree.NoHandle, []byte("buffered"), 0, false); err != nil {
		t.Fatal(err)
	}
	// The segment log's prefill asks for the free space on its own
	// goroutine (prefillRoom), so the test's answer is atomic.
	var free atomic.Uint64
	s.J.SetFreeSpace(func() (uint64, uint64, error) { return free.Load(), 1 << 30, nil })

	var buf bytes.Buffer
	fl := flushLog{log: zerolog.New(&buf)}
	now := time.Unix(1_000_000, 0)
	for range 180 {
		err := s.Live.FlushAll(tree.Caller{Comm: "reynfs"})
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("flush on the full disk: %v, want ENOSPC", err)
		}
		fl.note(err, now)
		now = now.Add(time.Second)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("3 minutes of failed flushes logged %d lines, want 3 (the first, then one a minute):\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[1], `"repeats":59`) {
		t.Errorf("second line does not count the 59 failures left out: %s", lines[1])
	}

	buf.Reset()
	free.Store(1 << 30)
	for range 5 {
		fl.note(s.Live.FlushAll(tree.Caller{Comm: "reynfs"}), now)
		now = now.Add(time.Second)
	}
	if got := strings.Count(buf.String(), "works again"); got != 1 || strings.Count(buf.String(), "\n") != 1 {
		t.Errorf("after space came back, logged:\n%s\nwant one recovery line", buf.String())
	}
}

// TestFlushLogNewClass: a failure of another kind is logged at once.
func TestFlushLogNewClass(t *testing.T) {
	var buf bytes.Buffer
	fl := flushLog{log: zerolog.New(&buf)}
	now := time.Unix(1_000_000, 0)
	fl.note(journal.ErrNoSpace, now)
	fl.note(journal.ErrNoSpace, now.Add(time.Second))
	fl.note(journal.ErrFailed, now.Add(2*time.Second))
	fl.note(journal.ErrFailed, now.Add(3*time.Second))
	if n := strings.Count(buf.String(), "\n"); n != 2 {
		t.Errorf("logged %d lines, want 2 (one per kind):\n%s", n, buf.String())
	}
}
