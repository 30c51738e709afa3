package integration

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Issue 8 follow-up: statfs in the mount used to report the store's file
// system's free space as is, so df showed megabytes available while every
// write got ENOSPC (reynfs keeps a reserve for cuts, rewinds and the
// unmount). It now reports what writers can use.

// statfsAvail returns the bytes statfs reports available under path.
func statfsAvail(t *testing.T, path string) (avail, total uint64) {
	t.Helper()
	var st unix.Statfs_t
	if err := withDeadline(t, "statfs "+path, func() error { return unix.Statfs(path, &st) }); err != nil {
		t.Fatalf("statfs %s: %v", path, err)
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize)
}

// TestStatfsLeavesOutReserve: the store on a 64 MiB tmpfs (reserve 8 MiB).
// df in the mount shows at least the reserve less than the disk has free,
// and once writers get ENOSPC it shows less than the size of the write
// that failed, not the megabytes of the reserve.
func TestStatfsLeavesOutReserve(t *testing.T) {
	requireFUSE(t)
	disk := smallTmpfs(t, "64m")
	proj := filepath.Join(t.TempDir(), "proj")
	writeFile(t, filepath.Join(proj, "keep.txt"), []byte("precious\n"), 0o644)
	m := mountWithStore(t, proj, filepath.Join(disk, "store"))
	const reserve = 8 << 20 // an eighth of 64 MiB (journal/space.go)

	diskAvail, diskTotal := statfsAvail(t, disk)
	inMount, mountTotal := statfsAvail(t, proj)
	if mountTotal != diskTotal {
		t.Errorf("mount reports %d bytes in all, the store's disk %d", mountTotal, diskTotal)
	}
	if inMount+reserve > diskAvail {
		t.Errorf("mount reports %d bytes available, the store's disk %d: want the %d-byte reserve left out",
			inMount, diskAvail, reserve)
	}

	// Each file is fsynced, so nothing stays buffered: Admit also counts
	// buffered data, twice, and a fill without fsync gets ENOSPC early,
	// for a moment, with megabytes still free.
	const chunk = 1 << 20
	var err error
	filled := 0
	for i := 0; i < 64 && err == nil; i++ {
		if err = writeSynced(t, filepath.Join(proj, fmt.Sprintf("fill-%02d", i)), randomBytes(t, chunk)); err == nil {
			filled++
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the workspace ended with %v after %d MiB, want ENOSPC\nlog:\n%s", err, filled, m.LogTail(10))
	}
	diskAvail, _ = statfsAvail(t, disk)
	inMount, _ = statfsAvail(t, proj)
	t.Logf("ENOSPC after %d MiB: the disk has %d bytes free, the mount reports %d", filled, diskAvail, inMount)
	// A write is admitted while what statfs reports (journal.Usable)
	// holds twice its size: after a refused write of at most chunk bytes
	// it reports less than that twice, where it used to report the
	// reserve and more.
	if inMount >= 3*chunk {
		t.Errorf("writers get ENOSPC, yet the mount reports %d bytes available (the disk has %d)", inMount, diskAvail)
	}
	if inMount > diskAvail {
		t.Errorf("the mount reports %d bytes available, more than the disk's %d", inMount, diskAvail)
	}
	m.Unmount()
}

// writeSynced writes a file on the mount and fsyncs it before closing.
func writeSynced(t *testing.T, path string, data []byte) error {
	t.Helper()
	return withDeadline(t, "write "+filepath.Base(path), func() error {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		_, werr := f.Write(data)
		var serr error
		if werr == nil {
			serr = f.Sync()
		}
		return errors.Join(werr, serr, f.Close())
	})
}
