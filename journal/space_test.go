package journal

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
)

// fakeFree makes the journal see avail bytes free on a 64 MiB file system.
func fakeFree(j *Journal, avail *atomic.Uint64) {
	j.SetFreeSpace(func() (uint64, uint64, error) { return avail.Load(), 64 << 20, nil })
}

// On a full disk Admit refuses ordinary writes with ErrNoSpace (ENOSPC),
// lets removals use half the reserve, fails nothing, and admits again once
// space comes back.
func TestAdmitFullDisk(t *testing.T) {
	j := openT(t, t.TempDir(), Options{})
	var avail atomic.Uint64
	avail.Store(64 << 20)
	fakeFree(j, &avail)
	if err := j.Admit(4096, AdmitWrite); err != nil {
		t.Fatalf("empty disk: %v", err)
	}
	reserve := reserveFor(64 << 20)
	avail.Store(reserve - 1)
	err := j.Admit(4096, AdmitWrite)
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("full disk: got %v, want ErrNoSpace wrapping ENOSPC", err)
	}
	if err := j.Admit(100, AdmitShrink); err != nil {
		t.Errorf("a removal with most of the reserve free: %v", err)
	}
	avail.Store(reserve/2 - 1)
	if err := j.Admit(100, AdmitShrink); !errors.Is(err, ErrNoSpace) {
		t.Errorf("a removal past half the reserve: got %v, want ErrNoSpace", err)
	}
	// The journal did not fail: privileged records still commit.
	r := &Record{Op: OpUnlink, Time: 1, Parent: 1, Name: "x"}
	if err := j.Enqueue(r, nil).Wait(); err != nil {
		t.Fatalf("enqueue on a full disk (privileged): %v", err)
	}
	avail.Store(64 << 20)
	if err := j.Admit(4096, AdmitWrite); err != nil {
		t.Fatalf("space back: %v", err)
	}
}

// Admit counts what is queued: a large pending batch needs its room too.
func TestAdmitCountsQueued(t *testing.T) {
	j := openT(t, t.TempDir(), Options{})
	var avail atomic.Uint64
	avail.Store(20 << 20)
	fakeFree(j, &avail)
	if err := j.Admit(1<<20, AdmitWrite); err != nil {
		t.Fatalf("1 MiB with 20 MiB free: %v", err)
	}
	if err := j.Admit(8<<20, AdmitWrite); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("8 MiB with 20 MiB free and an 8 MiB reserve: got %v, want ErrNoSpace", err)
	}
}

// The committer backs the active value log with blocks past what Badger
// has written, so a store into the mapping never needs a new block.
func TestPrepareAllocatesAhead(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, Options{})
	data := make([]byte, 256<<10)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	b := cas.Blob{Hash: cas.Sum(data), Data: data}
	r := &Record{Op: OpData, Time: 1, Ino: 2, Size: uint64(len(data)), Chunks: []Chunk{{0, b.Hash}}}
	if err := j.Enqueue(r, []cas.Blob{b}).Wait(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(LogPath(dir), "0000000000000001.seg")); err != nil || fi.Size() < int64(len(data)) {
		t.Errorf("the segment log does not hold the %d-byte blob: %v %v", len(data), fi, err)
	}
	vlog, _ := newest(ents, ".vlog")
	mem, _ := newest(ents, ".mem")
	for _, name := range []string{vlog, mem} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		end, err := writtenEnd(f, st.Blocks*512)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ahead := st.Blocks*512 - end; ahead < prepSlack {
			t.Errorf("%s: %d bytes allocated past the written end %d, want at least %d", name, ahead, end, prepSlack)
		}
	}
}

// A batch that cannot be backed is refused before Badger writes it: the
// commit fails with ErrNoSpace (and, as every commit error, ErrFailed)
// instead of the process dying of SIGBUS.
func TestPrepareRefusesWithoutSpace(t *testing.T) {
	j := openT(t, t.TempDir(), Options{})
	var avail atomic.Uint64
	avail.Store(1 << 10)
	fakeFree(j, &avail)
	data := make([]byte, 300<<10) // big enough to be checked at once
	data[0] = 1
	b := cas.Blob{Hash: cas.Sum(data), Data: data}
	r := &Record{Op: OpData, Time: 1, Ino: 2, Size: uint64(len(data)), Chunks: []Chunk{{0, b.Hash}}}
	err := j.Enqueue(r, []cas.Blob{b}).Wait()
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, ErrFailed) {
		t.Fatalf("300 KiB commit with 1 KiB free: got %v, want ErrNoSpace and ErrFailed", err)
	}
}

func TestWrittenEnd(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 300<<10)
	buf[0], buf[200<<10+7] = 1, 2
	if _, err := f.Write(buf); err != nil {
		t.Fatal(err)
	}
	for _, alloc := range []int64{300 << 10, 1 << 20} { // past the size reads as zeros
		if end, err := writtenEnd(f, alloc); err != nil || end != 200<<10+8 {
			t.Errorf("alloc %d: end %d, %v; want %d", alloc, end, err, 200<<10+8)
		}
	}
	if end, _ := writtenEnd(f, 100); end != 1 {
		t.Errorf("alloc 100: end %d, want 1", end)
	}
}

// Prepare backs a direct write (a value-log GC run) or refuses it with
// ErrNoSpace, without failing the journal.
func TestPrepareDirect(t *testing.T) {
	j := openT(t, t.TempDir(), Options{})
	if err := j.Prepare(1 << 20); err != nil {
		t.Fatalf("prepare 1 MiB on an empty disk: %v", err)
	}
	var avail atomic.Uint64
	avail.Store(1 << 20)
	fakeFree(j, &avail)
	if err := j.Prepare(8 << 20); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("prepare 8 MiB with 1 MiB free: got %v, want ErrNoSpace", err)
	}
	r := &Record{Op: OpUnlink, Time: 1, Parent: 1, Name: "x"}
	if err := j.Enqueue(r, nil).Wait(); err != nil {
		t.Fatalf("the journal after a refused Prepare: %v", err)
	}
}

// Admit reuses a recent statfs answer only far from the reserve: with
// plenty free, a burst of Admits asks statfs once and counts what it let
// through; a file system that filled up is seen at once after
// admitReuse; near the reserve every Admit asks.
func TestAdmitReusesStatfsFarFromReserve(t *testing.T) {
	j := openT(t, t.TempDir(), Options{})
	var avail, calls atomic.Uint64
	const total = 1 << 40
	avail.Store(10 << 30)
	j.SetFreeSpace(func() (uint64, uint64, error) { calls.Add(1); return avail.Load(), total, nil })
	for range 100 {
		if err := j.Admit(4096, AdmitWrite); err != nil {
			t.Fatalf("admit with 10 GiB free: %v", err)
		}
	}
	if c := calls.Load(); c > 5 {
		t.Errorf("100 admits with 10 GiB free asked statfs %d times; want about one per %s", c, admitReuse)
	}
	// What the reused answer let through is subtracted: 100 MiB writes
	// use it up long before 10 GiB do not.
	calls.Store(0)
	for range 60 {
		if err := j.Admit(100<<20, AdmitWrite); err != nil {
			t.Fatalf("admit of 100 MiB with 10 GiB free: %v", err)
		}
	}
	if calls.Load() == 0 {
		t.Errorf("60 admits of 100 MiB (12 GiB counted twice) never asked statfs again")
	}
	avail.Store(reserveFor(total) + 1<<20)
	time.Sleep(2 * admitReuse)
	if err := j.Admit(4<<20, AdmitWrite); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("after the disk filled up: got %v, want ErrNoSpace", err)
	}
	calls.Store(0)
	for range 10 {
		_ = j.Admit(4096, AdmitShrink)
	}
	if c := calls.Load(); c != 10 {
		t.Errorf("10 admits near the reserve asked statfs %d times; want every time", c)
	}
}

// BenchmarkAdmit is one ordinary write's admission on the real file system
// (statfs, or its reused answer).
func BenchmarkAdmit(b *testing.B) {
	j := openT(b, b.TempDir(), Options{})
	for b.Loop() {
		if err := j.Admit(4096, AdmitWrite); err != nil {
			b.Fatal(err)
		}
	}
}

// scanForward finds what writtenEnd finds, reading forward from a point
// inside the data: up to the allocated end, or up to a run of guard zero
// bytes; the zero runs inside the data that are shorter than guard do not
// stop it.
func TestScanForward(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 300<<10)
	buf[0], buf[5], buf[40<<10] = 1, 2, 3 // 40 KiB of zeros between
	buf[200<<10+7] = 4                    // 160 KiB of zeros between
	if _, err := f.Write(buf); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from, alloc, guard, want int64
	}{
		{0, 300 << 10, 64 << 10, 40<<10 + 1},   // stops at the 160 KiB run
		{0, 300 << 10, 256 << 10, 200<<10 + 8}, // the run is shorter than guard
		{3, 1 << 20, 256 << 10, 200<<10 + 8},   // past the size reads as zeros
		{6, 300 << 10, 64 << 10, 40<<10 + 1},   // from inside the data
		{6, 300 << 10, 32 << 10, 6},            // the 40 KiB run is a guard long
		{100 << 10, 300 << 10, 256 << 10, 200<<10 + 8},
		{200<<10 + 8, 300 << 10, 64 << 10, 200<<10 + 8}, // nothing new
		{0, 40 << 10, 256 << 10, 6},                     // alloc cuts the scan
	} {
		end, err := scanForward(f, c.from, c.alloc, c.guard)
		if err != nil || end != c.want {
			t.Errorf("from %d alloc %d guard %d: end %d, %v; want %d", c.from, c.alloc, c.guard, end, err, c.want)
		}
		if c.guard >= c.alloc {
			if we, _ := writtenEnd(f, c.alloc); we != end {
				t.Errorf("from %d alloc %d: scanForward %d, writtenEnd %d", c.from, c.alloc, end, we)
			}
		}
	}
}

// The committer's estimate of Badger's written end follows the real one:
// after many small commits (rescans, not full scans, between allocations)
// every active log still has prepSlack/2 allocated past what Badger
// wrote, the estimate is at or past the written end, and the rescans
// found what a full scan finds.
func TestAheadFollowsWrites(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, Options{})
	for i := range 600 {
		data := make([]byte, 3000)
		if _, err := rand.Read(data); err != nil {
			t.Fatal(err)
		}
		b := cas.Blob{Hash: cas.Sum(data), Data: data}
		r := &Record{Op: OpData, Time: int64(i + 1), Ino: 2, Size: uint64(len(data)), Chunks: []Chunk{{0, b.Hash}}}
		if err := j.Enqueue(r, []cas.Blob{b}).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	s := j.space
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.logs {
		if m == nil {
			continue
		}
		end, err := writtenEnd(m.f, m.alloc)
		if err != nil {
			t.Fatal(err)
		}
		if m.known > end {
			t.Errorf("%s: last rescan found %d, past the written end %d", m.name, m.known, end)
		}
		if m.est < end {
			t.Errorf("%s: estimate %d below the written end %d", m.name, m.est, end)
		}
		if m.alloc-end < prepSlack/2 {
			t.Errorf("%s: %d allocated past the written end %d, want at least %d", m.name, m.alloc-end, end, prepSlack/2)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(m.f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		if st.Blocks*512 < m.alloc {
			t.Errorf("%s: %d bytes have blocks, the estimate says %d", m.name, st.Blocks*512, m.alloc)
		}
		t.Logf("%s: written %d, known %d, est %d, alloc %d", m.name, end, m.known, m.est, m.alloc)
	}
}
