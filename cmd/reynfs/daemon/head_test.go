package daemon

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// serviceWithGenerations is newTestService for any testing.TB, with n
// generations cut after the import, in store dir.
func serviceWithGenerations(tb testing.TB, dir string, n int) *Service {
	tb.Helper()
	j, err := journal.Open(dir, journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = j.Close() })
	root, blobs, err := tree.New(j.Objects(), 0o755, 0, 0, 1).Root()
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := rewind.CommitImport(j, root, blobs, 2, "import"); err != nil {
		tb.Fatal(err)
	}
	tr, err := rewind.Reconstruct(j, j.Head())
	if err != nil {
		tb.Fatal(err)
	}
	live := tree.NewLive(tr, j, 2, 1<<20, func(uint64) error { return nil })
	s := &Service{J: j, Live: live, RW: &rewind.Rewinder{J: j, Live: live}}
	for range n {
		if _, err := s.RW.Cut(rewind.KindAuto, ""); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// BenchmarkReplyAfter2000Generations: every reply carries the head, and
// hooks cut a generation per tool call, so a reply's cost must not grow
// with the number of generations (issue 9: headOf once scanned the whole
// generation index twice per reply).
func BenchmarkReplyAfter2000Generations(b *testing.B) {
	start := time.Now()
	s := serviceWithGenerations(b, b.TempDir(), 2000)
	b.Logf("2000 generations cut in %v", time.Since(start).Round(time.Millisecond))
	b.Run("headOf", func(b *testing.B) {
		for b.Loop() {
			if _, err := headOf(s.J); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("takenNames", func(b *testing.B) {
		for b.Loop() {
			if _, err := rewind.TakenNames(s.J); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hello", func(b *testing.B) {
		var h api.HelloResult
		for b.Loop() {
			if err := Serve(s, api.HelloParams{Version: "1.0"}, &h); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// scannedHead is headOf as it was before the in-memory generation index:
// the newest generation's id from a scan of the index keys ('g' + seq)
// and the dropped-generation count in the store, and the reset count.
func scannedHead(t *testing.T, j *journal.Journal) (api.Head, []uint64) {
	t.Helper()
	h := api.Head{Seq: j.Head()}
	var seqs []uint64
	err := j.DB().View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte{'g'}
		it := txn.NewIterator(opts)
		defer it.Close()
		var last uint64
		for it.Rewind(); it.Valid(); it.Next() {
			if k := it.Item().Key(); len(k) == 9 {
				if s := binary.BigEndian.Uint64(k[1:]); s <= last {
					return fmt.Errorf("index out of order at seq %d", s)
				} else {
					last = s
				}
				seqs = append(seqs, last)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seqs) > 0 {
		h.Gen = len(seqs)
		if b, err := j.GetMeta("rewind.dropped-generations"); err != nil {
			t.Fatal(err)
		} else if len(b) > 0 {
			var d int
			if _, err := fmt.Sscan(string(b), &d); err != nil {
				t.Fatal(err)
			}
			h.Gen += d
		}
	}
	rs, err := j.Resets()
	if err != nil {
		t.Fatal(err)
	}
	h.Epoch = len(rs)
	return h, seqs
}

// TestHeadFollowsGenerations: the head every reply carries, read from the
// in-memory generation index, stays what a scan of the store says across
// checkpoints, a rewind, an undo, gc and reopening the store.
func TestHeadFollowsGenerations(t *testing.T) {
	dir := t.TempDir()
	s := serviceWithGenerations(t, dir, 3)
	check := func(step string, wantGen int) {
		t.Helper()
		got, err := headOf(s.J)
		if err != nil {
			t.Fatalf("%s: head: %v", step, err)
		}
		want, seqs := scannedHead(t, s.J)
		if got != want || (wantGen > 0 && got.Gen != wantGen) {
			t.Fatalf("%s: head %+v, the store says %+v (want generation g%d)", step, got, want, wantGen)
		}
		gens, err := rewind.Generations(s.J)
		if err != nil || !slices.Equal(gens, seqs) {
			t.Fatalf("%s: generations %v (%v), the index holds %v", step, gens, err, seqs)
		}
		tl, err := rewind.Timeline(s.J)
		if err != nil || len(tl) != len(seqs) {
			t.Fatalf("%s: timeline of %d generations (%v), the index holds %d", step, len(tl), err, len(seqs))
		}
		for i, g := range tl {
			if g.Rec.Seq != seqs[i] || g.ID != want.Gen-len(seqs)+1+i || g.Rec.Op != journal.OpGeneration {
				t.Fatalf("%s: timeline entry %d is g%d, a %s record at seq %d; want g%d at seq %d", step, i, g.ID, g.Rec.Op, g.Rec.Seq, want.Gen-len(seqs)+1+i, seqs[i])
			}
		}
		if id, err := rewind.GenerationID(s.J, seqs[0]); err != nil || id != want.Gen-len(seqs)+1 {
			t.Fatalf("%s: the oldest generation is g%d (%v), want g%d", step, id, err, want.Gen-len(seqs)+1)
		}
	}
	check("3 checkpoints", 4) // the import is g1
	if _, err := s.RW.Cut(rewind.KindManual, "fourth"); err != nil {
		t.Fatal(err)
	}
	check("checkpoint", 5)
	if _, err := s.Rewind("g2", false); err != nil {
		t.Fatal(err)
	}
	check("rewind", 0)
	// reopen closes the store and opens it again, served as the daemon
	// does (mounted) or unmounted (gc runs only there).
	reopen := func(mounted bool) {
		t.Helper()
		if err := s.J.Close(); err != nil {
			t.Fatal(err)
		}
		j, err := journal.Open(dir, journal.Options{Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = j.Close() })
		if err := rewind.Reindex(j); err != nil {
			t.Fatal(err)
		}
		s = &Service{J: j}
		if mounted {
			tr, err := rewind.Reconstruct(j, j.Head())
			if err != nil {
				t.Fatal(err)
			}
			s.Live = tree.NewLive(tr, j, tr.MaxIno()+1, 1<<20, func(uint64) error { return nil })
			s.RW = &rewind.Rewinder{J: j, Live: s.Live}
		}
	}
	reopen(true)
	check("reopen", 0)
	l, err := rewind.Ops(s.J)
	if err != nil {
		t.Fatal(err)
	}
	m, err := l.Next(false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RW.Rewind(m.Target, false); err != nil { // the undo of the rewind
		t.Fatal(err)
	}
	check("undo", 0)
	if _, err := s.RW.Cut(rewind.KindManual, "after undo"); err != nil {
		t.Fatal(err)
	}
	check("checkpoint after undo", 0)
	before, _ := headOf(s.J)
	reopen(false)
	if res, err := s.GC(2, false); err != nil || res.DroppedGens == 0 {
		t.Fatalf("gc: %+v, %v; want generations dropped", res, err)
	}
	check("gc", before.Gen)
	reopen(true)
	check("reopen after gc", before.Gen)
	if _, err := s.Rewind("-1", false); err != nil {
		t.Fatal(err)
	}
	check("rewind after gc", 0)
	if _, err := s.RW.Cut(rewind.KindManual, "after gc"); err != nil {
		t.Fatal(err)
	}
	check("checkpoint after gc", 0)
}
