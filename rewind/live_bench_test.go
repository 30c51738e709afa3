package rewind

import (
	"fmt"
	"testing"
	"time"

	"github.com/reynfs/reynfs/fs/tree"
)

// benchLive serves the head of a bench store as the daemon does.
func benchLive(b *testing.B, files int) (*benchStore, *Rewinder) {
	b.Helper()
	s := newBenchStore(b, files, 0)
	t, err := Reconstruct(s.j, s.j.Head())
	if err != nil {
		b.Fatal(err)
	}
	next := t.MaxIno() + 1
	live := tree.NewLive(t, s.j, next, next+1<<20, func(uint64) error { return nil })
	return s, &Rewinder{J: s.j, Live: live}
}

// touch rewrites n files (a different set each round).
func touch(b *testing.B, s *benchStore, rw *Rewinder, n, round int) {
	c := tree.Caller{Comm: "bench"}
	for i := range n {
		ino := s.inos[(round*n+i)*7919%len(s.inos)]
		data := fmt.Appendf(nil, "package p // round %d\n", round)
		// Truncate first: the bench store does not hold the old chunks.
		if _, err := rw.Live.SetAttr(c, ino, tree.SetAttrIn{Valid: tree.SetSize}); err != nil {
			b.Fatal(err)
		}
		if _, err := rw.Live.WriteAt(c, ino, tree.NoHandle, data, 0, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpoint cuts a generation after 10 files changed: the cost
// must follow the change, not the tree (issue 4: under 10 ms at 100k).
func BenchmarkCheckpoint(b *testing.B) {
	for _, files := range []int{1000, 10000, 100000} {
		if files > 10000 && testing.Short() {
			continue
		}
		b.Run(fmt.Sprintf("files=%d/changed=10", files), func(b *testing.B) {
			s, rw := benchLive(b, files)
			round := 0
			for b.Loop() {
				b.StopTimer()
				round++
				touch(b, s, rw, 10, round)
				b.StartTimer()
				if _, err := rw.Cut(KindManual, "bench"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRewind rewinds 100 changed files back to the generation before
// them (issue 4: under 100 ms at 100k).
func BenchmarkRewind(b *testing.B) {
	for _, files := range []int{1000, 10000, 100000} {
		if files > 10000 && testing.Short() {
			continue
		}
		b.Run(fmt.Sprintf("files=%d/changed=100", files), func(b *testing.B) {
			s, rw := benchLive(b, files)
			g, err := rw.Cut(KindManual, "base")
			if err != nil {
				b.Fatal(err)
			}
			round := 0
			phases := map[string]time.Duration{}
			for b.Loop() {
				b.StopTimer()
				round++
				touch(b, s, rw, 100, round)
				b.StartTimer()
				res, err := rw.Rewind(g.Seq, false)
				if err != nil {
					b.Fatal(err)
				}
				for _, p := range res.Phases {
					phases[p.Name] += p.Took
				}
			}
			reportPhases(b, phases, round)
		})
	}
}

// reportPhases reports the mean time of each phase of n rewinds in µs,
// so that a change shows where it saved.
func reportPhases(b *testing.B, phases map[string]time.Duration, n int) {
	if n == 0 {
		return
	}
	for name, d := range phases {
		b.ReportMetric(float64(d.Microseconds())/float64(n), name+"-µs")
	}
}
