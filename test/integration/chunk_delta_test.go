package integration

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestChunkDeltaChains: 4 KiB page rewrites and fsync'd appends make each
// changed chunk a delta against the version before it, in chains longer
// than a generation. Rewinds to older generations read those versions
// back through a fresh mount (nothing cached, every chain walked), after
// a kill -9 the fsync'd bytes are there, and gc keeping only the newest
// generation keeps the bases its chunks' deltas need (fsck re-hashes all
// of it, and the cleanup runs fsck again).
func TestChunkDeltaChains(t *testing.T) {
	m := mountProject(t, t.TempDir())
	path := filepath.Join(m.Dir, "db")
	rng := rand.New(rand.NewPCG(21, 22))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := 0; i+8 <= n; i += 8 {
			binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
		}
		return b
	}
	want := random(256 << 10)
	writeFile(t, path, want, 0o644)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var gens [][]byte
	for g := range 4 {
		for i := range 24 {
			p := random(4096)
			off := rng.IntN(len(want)/4096) * 4096
			if i%3 == 2 {
				off = len(want) // an append
				want = append(want, p...)
			} else {
				copy(want[off:], p)
			}
			if _, err := f.WriteAt(p, int64(off)); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		retainRun(t, m, "checkpoint", "-m", fmt.Sprintf("gen-%d", g))
		gens = append(gens, bytes.Clone(want))
	}
	// Written and fsync'd after the last generation: only the log has it.
	p := random(4096)
	copy(want[4096:], p)
	if _, err := f.WriteAt(p, 4096); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	check := func(what string, w []byte) {
		t.Helper()
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, w) {
			t.Fatalf("%s: %d bytes (%v), want %d bytes as written", what, len(got), err, len(w))
		}
	}
	m.Kill9()
	rwRemountAfterCrash(t, m)
	check("after kill -9", want)
	for _, g := range []int{0, 2, 1} {
		retainRun(t, m, "rewind", fmt.Sprintf("gen-%d", g))
		m.Unmount()
		m.Mount()
		check(fmt.Sprintf("rewound to g%d, remounted", g), gens[g])
	}
	retainRun(t, m, "rewind", "gen-3")
	retainRun(t, m, "gc", "--keep", "1")
	m.Unmount()
	if r := m.Run("fsck", "--store", m.Store); r.Code != 0 {
		t.Fatalf("fsck after gc: exit %d: %s%s", r.Code, r.Stderr, r.Stdout)
	}
	m.Mount()
	check("after gc, remounted", gens[3])
}
