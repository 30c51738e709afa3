package rewind

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// genTree writes files small source-like text files under dir, 100 to a
// directory, as scripts/bench.sh's gentree does (test/bench/benchtool.py:
// dir/tNN/dNN/fNN.txt, 200 B to about 4 KiB each, all different).
func genTree(tb testing.TB, dir string, files int) {
	tb.Helper()
	var sb strings.Builder
	for i := range files {
		p := filepath.Join(dir, fmt.Sprintf("t%02d", i/10000), fmt.Sprintf("d%02d", i/100%100), fmt.Sprintf("f%02d.txt", i%100))
		if i%100 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				tb.Fatal(err)
			}
		}
		sb.Reset()
		fmt.Fprintf(&sb, "// file %d version 0\n", i)
		for k := range 4 + (i*7919)%90 {
			fmt.Fprintf(&sb, "line %d of file %d: the quick brown fox %d\n", k, i, (i*k)%997)
		}
		if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkImport is the first mount's import of a generated tree into a
// fresh store, as the daemon does it (Fresh, CommitFreshImport): the walk
// and the stores of the chunks, the Merkle root, and the import
// generation's commit. It reports each step's share (ms) and the CPU time
// the import took (cpu-ms) beside the total. store=memory leaves the
// store's own cost out (no commit then). The tree is generated under
// $REYNFS_IMPORT_DIR if set (a tmpfs keeps the disk out of it), else the
// test's temp dir.
func BenchmarkImport(b *testing.B) {
	for _, files := range []int{1000, 100000} {
		if files > 1000 && testing.Short() {
			continue
		}
		src := ""
		for _, store := range []string{"memory", "journal"} {
			outer := b
			b.Run(fmt.Sprintf("files=%d/store=%s", files, store), func(b *testing.B) {
				if src == "" {
					src = importBenchTree(outer, files)
				}
				benchImport(b, src, store == "journal")
			})
		}
	}
}

func importBenchTree(b *testing.B, files int) string {
	dir, err := os.MkdirTemp(os.Getenv("REYNFS_IMPORT_DIR"), "import-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	genTree(b, dir, files)
	return dir
}

func benchImport(b *testing.B, src string, journaled bool) {
	var walk, root, commit, cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		var j *journal.Journal
		var store cas.Store = cas.NewMemory()
		if journaled {
			j = openJournal(b, b.TempDir())
			store = j.Objects()
		}
		b.StartTimer()
		c0 := cpuTime()
		t0 := time.Now()
		next := uint64(2)
		im := &Importer{Store: store, Fresh: true, Alloc: func() (uint64, error) { next++; return next - 1, nil }}
		tr, err := im.Import(src)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if j == nil {
			if _, _, err := tr.Root(); err != nil {
				b.Fatal(err)
			}
		}
		t2 := time.Now() // with a journal, Root runs in the commit
		if j != nil {
			if _, _, err := CommitFreshImport(j, tr, next, "bench"); err != nil {
				b.Fatal(err)
			}
		}
		t3 := time.Now()
		walk, root, commit = walk+t1.Sub(t0), root+t2.Sub(t1), commit+t3.Sub(t2)
		cpu += cpuTime() - c0
		b.StopTimer()
		if j != nil {
			if err := j.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(walk.Milliseconds())/n, "walk-ms/op")
	b.ReportMetric(float64(root.Milliseconds())/n, "root-ms/op")
	b.ReportMetric(float64(commit.Milliseconds())/n, "commit-ms/op")
	b.ReportMetric(float64(cpu.Milliseconds())/n, "cpu-ms/op")
}

// cpuTime is the CPU time the process has used (user and system, every
// thread): on a machine others load, the import's CPU is steadier to
// compare than its wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
