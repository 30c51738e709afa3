package journal

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

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
