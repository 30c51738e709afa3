package integration

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestWritePathSurvivesKill9 drives the write path's shapes through the
// mount — 1 MiB sequential writes of random bytes (frames of many chunks
// written with pwritev), 4 KiB random overwrites (read-modify-write of
// chunks just committed), fsync'd 4 KiB appends (a chunk growing across
// syncs), compressible text — fsyncs, kills the daemon with SIGKILL and
// checks that the remounted file, and the one written back at unmount,
// are byte for byte what was written.
func TestWritePathSurvivesKill9(t *testing.T) {
	m := mountProject(t, t.TempDir())
	path := filepath.Join(m.Dir, "data.bin")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(11, 12))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := 0; i+8 <= n; i += 8 {
			binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
		}
		return b
	}
	var want []byte
	writeAt := func(p []byte, off int) {
		t.Helper()
		if _, err := f.WriteAt(p, int64(off)); err != nil {
			t.Fatal(err)
		}
		if end := off + len(p); end > len(want) {
			want = append(want, make([]byte, end-len(want))...)
		}
		copy(want[off:], p)
	}
	for i := range 6 { // sequential 1 MiB writes
		writeAt(random(1<<20), i<<20)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	for range 300 { // random 4 KiB overwrites, some across a chunk boundary
		off := rng.IntN(len(want)-8192) &^ 511
		writeAt(random(4096), off)
	}
	text := bytes.Repeat([]byte("func (l *Live) WriteAt(p []byte) error { return nil }\n"), 2000)
	writeAt(text, len(want))
	for range 40 { // fsync'd appends
		writeAt(random(4096), len(want))
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	m.Kill9()
	rwRemountAfterCrash(t, m)
	check := func(when string) {
		t.Helper()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if !bytes.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Fatalf("%s: file of %d bytes differs from the %d written, first at byte %d", when, len(got), len(want), i)
		}
	}
	check("remounted after kill -9")
	m.Unmount()
	check("written back")
}

// TestLentWritesSurviveKill9 writes 1 MiB sequential writes of random
// bytes (each lends its request buffer to its frame, and replies once the
// frame is in the log, before its index), neither fsyncs nor closes, and
// kills the daemon with SIGKILL: every write that returned is in the log,
// and the remounted file is byte for byte what was written.
func TestLentWritesSurviveKill9(t *testing.T) {
	m := mountProject(t, t.TempDir())
	path := filepath.Join(m.Dir, "seq.bin")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(21, 22))
	var want []byte
	p := make([]byte, 1<<20)
	for range 24 {
		for i := 0; i+8 <= len(p); i += 8 {
			binary.LittleEndian.PutUint64(p[i:], rng.Uint64())
		}
		if _, err := f.Write(p); err != nil {
			t.Fatal(err)
		}
		want = append(want, p...)
	}
	m.Kill9()
	_ = f.Close() // the daemon is gone
	rwRemountAfterCrash(t, m)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("remounted after kill -9: %v", err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("remounted after kill -9: file of %d bytes differs from the %d written, first at byte %d", len(got), len(want), i)
	}
	m.Unmount()
}
