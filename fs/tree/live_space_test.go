package tree

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// Issue 8 items 11 and 13: an operation the journal must refuse is an
// errno for that operation, decided before the tree changes, and the live
// tree stays writable.

// fullDisk makes the journal see avail bytes free on a 64 MiB file system.
func fullDisk(j *journal.Journal, avail *atomic.Uint64) {
	j.SetFreeSpace(func() (uint64, uint64, error) { return avail.Load(), 64 << 20, nil })
}

func TestLiveFullDiskIsENOSPC(t *testing.T) {
	l, j := newTestLive(t)
	var avail atomic.Uint64
	avail.Store(64 << 20)
	fullDisk(j, &avail)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create(testCaller, RootIno, "old", syscall.S_IFREG|0o644, 0); err != nil {
		t.Fatal(err)
	}
	avail.Store(6 << 20) // below the 8 MiB reserve of a 64 MiB file system, above half of it
	for name, op := range map[string]func() error{
		"write":  func() error { _, err := l.WriteAt(testCaller, st.Ino, NoHandle, []byte("x"), 0, false); return err },
		"create": func() error { _, err := l.Create(testCaller, RootIno, "g", syscall.S_IFREG|0o644, 0); return err },
		"mkdir":  func() error { _, err := l.Mkdir(testCaller, RootIno, "d", 0o755); return err },
	} {
		if err := op(); !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("%s on a full disk: got %v, want ENOSPC", name, err)
		}
	}
	if a, _ := l.GetAttr(st.Ino); a.Size != 0 {
		t.Errorf("a refused write changed the size to %d", a.Size)
	}
	if _, err := l.Lookup(RootIno, "g"); !errors.Is(err, ErrNotExist) {
		t.Errorf("a refused create left a name: %v", err)
	}
	// Removing is still possible: it may use half the reserve.
	if err := l.Unlink(testCaller, RootIno, "old"); err != nil {
		t.Fatalf("unlink on a full disk: %v", err)
	}
	// Space comes back: writes resume, nothing failed for good.
	avail.Store(64 << 20)
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, []byte("back"), 0, false); err != nil {
		t.Fatalf("write after space came back: %v", err)
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	want := snapshot(l.Tree())
	if got := snapshot(replay(t, j)); !reflect.DeepEqual(got, want) {
		t.Errorf("replay differs from the live tree:\n got %v\nwant %v", got, want)
	}
}

// Buffered writes admitted before the disk filled reach the journal when a
// generation cut or an unmount flushes them (FlushAllLocked, Sync): those
// may use the reserve, ordinary flushes may not.
func TestLiveFullDiskPrivilegedFlush(t *testing.T) {
	l, j := newTestLive(t)
	var avail atomic.Uint64
	avail.Store(64 << 20)
	fullDisk(j, &avail)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, []byte("buffered"), 0, false); err != nil {
		t.Fatal(err)
	}
	avail.Store(1 << 20)
	if err := l.Flush(testCaller, st.Ino); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("close-time flush on a full disk: got %v, want ENOSPC", err)
	}
	buf := make([]byte, 16)
	if k, _ := l.ReadAt(st.Ino, buf, 0); string(buf[:k]) != "buffered" {
		t.Fatalf("buffered data after a refused flush: %q", buf[:k])
	}
	if err := l.Sync(testCaller); err != nil {
		t.Fatalf("syncfs (unmount's flush) on a full disk: %v", err)
	}
	k, err := replay(t, j).ReadAt(replay(t, j).nodes[st.Ino], buf, 0)
	if err != nil || string(buf[:k]) != "buffered" {
		t.Fatalf("replayed content %q, %v", buf[:k], err)
	}
}

// fallocate --punch-hole over a 40 GiB sparse file (issue 8 item 13): it
// used to journal one zero-hash entry per 64 KiB slot, a 22.9 MB record
// the journal refused after the tree had changed, leaving the mount
// read-only.
func TestLivePunchHoleHugeSparse(t *testing.T) {
	l, j := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "big", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	const size = 40 << 30
	if _, err := l.SetAttr(testCaller, st.Ino, SetAttrIn{Valid: SetSize, Size: size}); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("d"), 3*cas.ChunkSize)
	for _, off := range []uint64{0, size / 2, size - uint64(len(data))} {
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, data, off, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	if err := l.Fallocate(testCaller, st.Ino, NoHandle, FallocPunchHole|FallocKeepSize, 0, size); err != nil {
		t.Fatalf("punch-hole over 40 GiB: %v", err)
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	biggest := 0
	_ = j.Iter(1, func(r *journal.Record) error {
		biggest = max(biggest, r.EncodedLen())
		return nil
	})
	if biggest > 4096 {
		t.Errorf("largest record %d bytes, want a few hundred", biggest)
	}
	// Still writable, and the replay agrees.
	if _, err := l.Create(testCaller, RootIno, "after", syscall.S_IFREG|0o644, 0); err != nil {
		t.Fatalf("create after the punch: %v", err)
	}
	buf := make([]byte, 4)
	tr := replay(t, j)
	n := tr.nodes[st.Ino]
	if k, err := tr.ReadAt(n, buf, size/2); err != nil || k != 4 || !bytes.Equal(buf, make([]byte, 4)) {
		t.Errorf("replayed punched content %q, %v", buf[:k], err)
	}
	if n.Size != size || n.Blocks() != 0 {
		t.Errorf("replayed size %d blocks %d, want %d and 0", n.Size, n.Blocks(), size)
	}
}

// One-byte writes 64 KiB apart are legal; each buffer counts at least
// minSlotBytes towards the per-file flush, so no record gathers more chunk
// entries than the journal takes.
func TestLiveScatteredWritesBoundRecords(t *testing.T) {
	l, j := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "sparse", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	const writes = 3000
	for i := range uint64(writes) {
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, []byte{1}, i*cas.ChunkSize, false); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	most := 0
	_ = j.Iter(1, func(r *journal.Record) error {
		most = max(most, len(r.Chunks))
		return nil
	})
	if limit := FileBufferBytes/minSlotBytes + 1; most > limit {
		t.Errorf("a record holds %d chunk entries, want at most %d", most, limit)
	}
}

// Extended attributes live in the inode's object: their total is bounded
// (ENOSPC past MaxXattrBytes, as ext4 when an inode's xattr space is full)
// so no setxattr sequence makes an object a generation cut cannot store.
func TestLiveXattrTotalBounded(t *testing.T) {
	l, _ := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("v"), 64<<10) // the kernel's XATTR_SIZE_MAX
	var i int
	for i = 0; i < MaxXattrBytes/len(value)+2; i++ {
		if err = l.SetXattr(testCaller, st.Ino, fmt.Sprintf("user.a%d", i), value, 0); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("after %d 64 KiB attributes: %v, want ErrNoSpace", i, err)
	}
	// Replacing one keeps the total and is still allowed; the file stays writable.
	if err := l.SetXattr(testCaller, st.Ino, "user.a0", []byte("small"), 0); err != nil {
		t.Fatalf("replace an attribute at the bound: %v", err)
	}
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, []byte("data"), 0, false); err != nil {
		t.Fatalf("write after the refused setxattr: %v", err)
	}
}

// Records written before hole ranges existed name holes as zero hashes in
// Chunks; they still replay, and both forms give the same file.
func TestApplyOldHoleRecords(t *testing.T) {
	data := bytes.Repeat([]byte("z"), cas.ChunkSize)
	h := cas.Sum(data)
	old := &journal.Record{Op: journal.OpData, Ino: 2, Size: 4 * cas.ChunkSize, Time: 5, Mtime: 5,
		Chunks: []journal.Chunk{{Index: 0, Hash: cas.Zero}, {Index: 1, Hash: cas.Zero}, {Index: 3, Hash: h}}}
	cur := &journal.Record{Op: journal.OpData, Ino: 2, Size: 4 * cas.ChunkSize, Time: 5, Mtime: 5,
		Chunks: []journal.Chunk{{Index: 3, Hash: h}}, Holes: []journal.HoleRange{{Start: 0, Count: 2}}}
	var got [][]cas.Hash
	for _, r := range []*journal.Record{old, cur} {
		tr, s := newTestTree(t)
		if _, err := s.Put(data); err != nil {
			t.Fatal(err)
		}
		mustApply(t, tr, rCreate(RootIno, "f", 2))
		// Content first, so the later record has to turn data into holes.
		mustApply(t, tr, &journal.Record{Op: journal.OpData, Ino: 2, Size: 4 * cas.ChunkSize, Time: 4, Mtime: 4,
			Chunks: []journal.Chunk{{Index: 0, Hash: h}, {Index: 1, Hash: h}, {Index: 2, Hash: h}}})
		b, err := journal.Decode(journal.Encode(r))
		if err != nil {
			t.Fatal(err)
		}
		mustApply(t, tr, b)
		n := tr.nodes[2]
		got = append(got, slices.Clone(n.ChunkHashes()))
		if n.Blocks() != 2*cas.ChunkSize/512 {
			t.Errorf("%d blocks, want two chunks' worth", n.Blocks())
		}
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("old record gives %v, hole ranges %v", got[0], got[1])
	}
}

// A directory's entries are bounded by what its object can hold: past
// maxDirBytes a new name is ENOSPC (ext4 answers the same when a
// directory's index is full), removing and renaming within still work,
// and the mount stays writable.
func TestLiveDirectoryBounded(t *testing.T) {
	saved := maxDirBytes
	maxDirBytes = 64 * (MaxName + dirEntryBytes) // 64 entries of the longest names
	t.Cleanup(func() { maxDirBytes = saved })
	l, _ := newTestLive(t)
	d, err := l.Mkdir(testCaller, RootIno, "d", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("n", MaxName-4)
	var i int
	for i = 0; i < 200; i++ {
		if _, err = l.Create(testCaller, d.Ino, fmt.Sprintf("%s%04d", long, i), syscall.S_IFREG|0o644, 0); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrNoSpace) || i < 64 {
		t.Fatalf("after %d names: %v, want ErrNoSpace after at least 64", i, err)
	}
	if _, err := l.Mkdir(testCaller, d.Ino, "sub", 0o755); !errors.Is(err, ErrNoSpace) {
		t.Errorf("mkdir in the full directory: %v, want ErrNoSpace", err)
	}
	if err := l.Unlink(testCaller, d.Ino, fmt.Sprintf("%s%04d", long, 0)); err != nil {
		t.Fatalf("unlink in the full directory: %v", err)
	}
	if _, err := l.Create(testCaller, d.Ino, "short", syscall.S_IFREG|0o644, 0); err != nil {
		t.Fatalf("create after making room: %v", err)
	}
	if _, err := l.Create(testCaller, RootIno, "elsewhere", syscall.S_IFREG|0o644, 0); err != nil {
		t.Fatalf("create in another directory: %v", err)
	}
}
