// Package journaltest is the conformance suite every journal backend runs:
// the same body checks seq assignment, group commit, sync, reads, meta and
// reset resolution, so a second backend is held to the same contract.
package journaltest

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// Opener opens (or creates) the store in dir. It must not close the journal
// itself: the suite closes what it opens (a second Close returning
// ErrClosed is expected).
type Opener func(t *testing.T, dir string) *journal.Journal

// Run runs every conformance test as a subtest.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"AppendGet", testAppendGet},
		{"Iter", testIter},
		{"SeqsSurviveReopen", testReopen},
		{"GroupCommit", testGroupCommit},
		{"ConcurrentSync", testConcurrentSync},
		{"InvalidRecord", testInvalid},
		{"Resets", testResets},
		{"Meta", testMeta},
		{"Closed", testClosed},
		{"BlobDedup", testBlobDedup},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// openIn opens dir and closes the journal when the test ends.
func openIn(t *testing.T, open Opener, dir string) *journal.Journal {
	t.Helper()
	j := open(t, dir)
	t.Cleanup(func() { _ = j.Close() })
	return j
}

// Blob returns a blob of n bytes derived from seed.
func Blob(seed string, n int) cas.Blob {
	data := make([]byte, n)
	for i := range data {
		data[i] = seed[i%len(seed)] + byte(i/len(seed))
	}
	return cas.Blob{Hash: cas.Sum(data), Data: data}
}

// DataRecord returns an OpData record naming blob as chunk 0 of ino.
func DataRecord(ino uint64, blob cas.Blob) *journal.Record {
	return &journal.Record{
		Op: journal.OpData, Time: 1781300000000000000 + int64(ino), Pid: 100, Comm: "test",
		Ino: ino, Size: uint64(len(blob.Data)), Kind: journal.DataWrite,
		Chunks: []journal.Chunk{{Index: 0, Hash: blob.Hash}},
	}
}

func mustAppend(t *testing.T, j *journal.Journal, r *journal.Record, blobs ...cas.Blob) uint64 {
	t.Helper()
	p := j.Enqueue(r, blobs)
	if err := p.Wait(); err != nil {
		t.Fatalf("append %s: %v", r.Op, err)
	}
	if p.Seq() != r.Seq || r.Seq == 0 {
		t.Fatalf("Pending.Seq %d, record seq %d", p.Seq(), r.Seq)
	}
	return r.Seq
}

func testAppendGet(t *testing.T, open Opener) {
	j := openIn(t, open, t.TempDir())
	if j.Head() != 0 || j.Durable() != 0 {
		t.Fatalf("new journal: head %d durable %d, want 0 0", j.Head(), j.Durable())
	}
	b := Blob("hello", 4096)
	recs := []*journal.Record{
		{Op: journal.OpCreate, Time: 1, Comm: "touch", Parent: 1, Name: "a", Ino: 2, Mode: 0o100644},
		DataRecord(2, b),
		{Op: journal.OpRename, Time: 3, Parent: 1, Name: "a", NewParent: 1, NewName: "b"},
		{Op: journal.OpSetxattr, Time: 4, Ino: 2, XName: "user.x", XValue: []byte("v")},
		{Op: journal.OpGeneration, Time: 5, GenKind: "manual", Label: "one", Root: b.Hash, NextIno: 3},
	}
	for i, r := range recs {
		var blobs []cas.Blob
		if r.Op == journal.OpData {
			blobs = []cas.Blob{b}
		}
		if seq := mustAppend(t, j, r, blobs...); seq != uint64(i+1) {
			t.Fatalf("record %d got seq %d", i, seq)
		}
	}
	if j.Head() != 5 || j.Durable() != 5 {
		t.Fatalf("head %d durable %d, want 5 5", j.Head(), j.Durable())
	}
	for _, want := range recs {
		got, err := j.Get(want.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Get(%d) = %+v, want %+v", want.Seq, got, want)
		}
	}
	if _, err := j.Get(6); !errors.Is(err, journal.ErrNotFound) {
		t.Errorf("Get(6) = %v, want ErrNotFound", err)
	}
	if _, err := j.Get(0); !errors.Is(err, journal.ErrNotFound) {
		t.Errorf("Get(0) = %v, want ErrNotFound", err)
	}
	data, err := j.Objects().Get(b.Hash)
	if err != nil || string(data) != string(b.Data) {
		t.Errorf("blob of the data record: %v", err)
	}
}

func testIter(t *testing.T, open Opener) {
	j := openIn(t, open, t.TempDir())
	calls := 0
	if err := j.Iter(0, func(*journal.Record) error { calls++; return nil }); err != nil || calls != 0 {
		t.Fatalf("Iter on an empty journal: %d calls, %v", calls, err)
	}
	for i := range 20 {
		mustAppend(t, j, &journal.Record{Op: journal.OpMkdir, Parent: 1, Name: fmt.Sprint("d", i), Ino: uint64(i + 2)})
	}
	var got []uint64
	if err := j.Iter(7, func(r *journal.Record) error { got = append(got, r.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 14 || got[0] != 7 || got[13] != 20 {
		t.Fatalf("Iter(7) visited %v", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1]+1 {
			t.Fatalf("Iter out of order: %v", got)
		}
	}
	stop := errors.New("stop")
	n := 0
	err := j.Iter(1, func(*journal.Record) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Errorf("Iter stopped after %d with %v, want 3 and the callback's error", n, err)
	}
}

func testReopen(t *testing.T, open Opener) {
	dir := t.TempDir()
	j := open(t, dir)
	for range 5 {
		mustAppend(t, j, &journal.Record{Op: journal.OpUnlink, Parent: 1, Name: "x"})
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openIn(t, open, dir)
	if j.Head() != 5 || j.Durable() != 5 {
		t.Fatalf("reopened: head %d durable %d, want 5 5", j.Head(), j.Durable())
	}
	if seq := mustAppend(t, j, &journal.Record{Op: journal.OpUnlink, Parent: 1, Name: "y"}); seq != 6 {
		t.Fatalf("first seq after reopen = %d, want 6", seq)
	}
}

func testGroupCommit(t *testing.T, open Opener) {
	j := openIn(t, open, t.TempDir())
	const writers, each = 8, 200
	var order sync.Mutex // callers serialize Enqueue so Enqueue order = seq order
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				b := Blob(fmt.Sprintf("w%di%d", w, i), 4096)
				order.Lock()
				p := j.Enqueue(DataRecord(uint64(w+2), b), []cas.Blob{b})
				order.Unlock()
				if err := p.Wait(); err != nil {
					errs <- err
					return
				}
				if j.Durable() < p.Seq() {
					errs <- fmt.Errorf("Durable %d below a committed seq %d", j.Durable(), p.Seq())
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
	if st.Records != writers*each || st.BlobsWritten != writers*each {
		t.Errorf("stats %+v: want %d records and blobs", st, writers*each)
	}
	if st.Commits >= st.Records || st.MaxBatch < 2 {
		t.Errorf("no group commit: %d commits for %d records (max batch %d)", st.Commits, st.Records, st.MaxBatch)
	}
	want := uint64(1)
	err := j.Iter(0, func(r *journal.Record) error {
		if r.Seq != want {
			return fmt.Errorf("seq %d where %d was expected", r.Seq, want)
		}
		want++
		return nil
	})
	if err != nil || want != writers*each+1 {
		t.Fatalf("after group commit: %v (next %d)", err, want)
	}
}

func testConcurrentSync(t *testing.T, open Opener) {
	j := openIn(t, open, t.TempDir())
	const workers, each = 6, 30
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				p := j.Enqueue(&journal.Record{Op: journal.OpUnlink, Parent: uint64(w + 1), Name: fmt.Sprint(i)}, nil)
				if err := j.Sync(); err != nil {
					errs <- err
					return
				}
				// Sync covers everything enqueued before it.
				if j.Durable() < p.Seq() {
					errs <- fmt.Errorf("after Sync, Durable %d < %d", j.Durable(), p.Seq())
					return
				}
				if err := p.Wait(); err != nil {
					errs <- err
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
	if st := j.Stats(); st.Syncs == 0 || st.Syncs > workers*each {
		t.Errorf("%d db syncs for %d Sync calls", st.Syncs, workers*each)
	}
	if err := j.Sync(); err != nil {
		t.Fatalf("Sync with nothing pending: %v", err)
	}
}

func testInvalid(t *testing.T, open Opener) {
	j := openIn(t, open, t.TempDir())
	mustAppend(t, j, &journal.Record{Op: journal.OpUnlink, Parent: 1, Name: "a"})
	bad := []*journal.Record{
		{Op: journal.OpInvalid},
		{Op: journal.OpMkdir, Parent: 1, Name: "d", Ino: 9, Size: 4}, // Size is not a mkdir field
		{Op: journal.OpReset, ResetTo: 2},                            // would get seq 2: not an earlier seq
	}
	for _, r := range bad {
		p := j.Enqueue(r, nil)
		if err := p.Wait(); !errors.Is(err, journal.ErrInvalid) {
			t.Errorf("Enqueue(%+v) = %v, want ErrInvalid", r, err)
		}
		if p.Seq() != 0 || r.Seq != 0 {
			t.Errorf("refused record got seq %d/%d", p.Seq(), r.Seq)
		}
	}
	if seq := mustAppend(t, j, &journal.Record{Op: journal.OpUnlink, Parent: 1, Name: "b"}); seq != 2 {
		t.Errorf("after refusals the next seq is %d, want 2", seq)
	}
}

func testResets(t *testing.T, open Opener) {
	dir := t.TempDir()
	j := open(t, dir)
	for range 10 {
		mustAppend(t, j, &journal.Record{Op: journal.OpUnlink, Parent: 1, Name: "f"})
	}
	r1 := mustAppend(t, j, &journal.Record{Op: journal.OpReset, ResetTo: 5}) // 11
	mustAppend(t, j, &journal.Record{Op: journal.OpUnlink, Parent: 1, Name: "g"})
	r2 := mustAppend(t, j, &journal.Record{Op: journal.OpReset, ResetTo: 8, Supersedes: r1}) // 13
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openIn(t, open, dir)
	rs, err := j.Resets()
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Seq != r1 || rs[1].Seq != r2 || rs[1].ResetTo != 8 || rs[1].Supersedes != r1 {
		t.Fatalf("Resets = %+v", rs)
	}
	p, err := j.Path()
	if err != nil {
		t.Fatal(err)
	}
	head := j.Head()
	for seq, want := range map[uint64]bool{1: true, 5: true, 8: true, 9: false, 11: false, 12: false, 13: true} {
		if got := p.Active(seq, head); got != want {
			t.Errorf("Active(%d, %d) = %v, want %v", seq, head, got, want)
		}
	}
	if p.Latest() != r2 {
		t.Errorf("Latest = %d, want %d", p.Latest(), r2)
	}
}

func testMeta(t *testing.T, open Opener) {
	dir := t.TempDir()
	j := open(t, dir)
	if v, err := j.GetMeta("mount"); v != nil || err != nil {
		t.Fatalf("absent meta = %q, %v", v, err)
	}
	if err := j.SetMeta("mount", []byte("/home/u/p")); err != nil {
		t.Fatal(err)
	}
	if err := j.SetMeta("gone", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := j.SetMeta("gone", nil); err != nil {
		t.Fatal(err)
	}
	if err := j.SetMeta("", []byte("x")); !errors.Is(err, journal.ErrInvalid) {
		t.Errorf("empty key: %v, want ErrInvalid", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openIn(t, open, dir)
	if v, err := j.GetMeta("mount"); string(v) != "/home/u/p" || err != nil {
		t.Errorf("meta after reopen = %q, %v", v, err)
	}
	if v, err := j.GetMeta("gone"); v != nil || err != nil {
		t.Errorf("deleted meta = %q, %v", v, err)
	}
	if j.Head() != 0 {
		t.Errorf("meta writes used seqs: head %d", j.Head())
	}
}

func testClosed(t *testing.T, open Opener) {
	j := open(t, t.TempDir())
	mustAppend(t, j, &journal.Record{Op: journal.OpUnlink, Parent: 1, Name: "a"})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	checks := map[string]error{
		"Enqueue": j.Enqueue(&journal.Record{Op: journal.OpUnlink, Parent: 1, Name: "b"}, nil).Wait(),
		"Sync":    j.Sync(),
		"SetMeta": j.SetMeta("k", []byte("v")),
		"Close":   j.Close(),
	}
	_, checks["Get"] = j.Get(1)
	_, checks["GetMeta"] = j.GetMeta("k")
	checks["Iter"] = j.Iter(0, func(*journal.Record) error { return nil })
	for name, err := range checks {
		if !errors.Is(err, journal.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

func testBlobDedup(t *testing.T, open Opener) {
	j := openIn(t, open, t.TempDir())
	b := Blob("same", 4096)
	var ps []*journal.Pending
	for i := range 4 {
		ps = append(ps, j.Enqueue(DataRecord(uint64(i+2), b), []cas.Blob{b}))
	}
	for _, p := range ps {
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, j, DataRecord(9, b), b)
	st := j.Stats()
	if st.BlobsWritten != 1 || st.BlobsDeduped != 4 {
		t.Errorf("one blob five times: %d written, %d deduped", st.BlobsWritten, st.BlobsDeduped)
	}
}
