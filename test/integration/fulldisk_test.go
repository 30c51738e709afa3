package integration

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Issue 8 items 11 and 13 (DESIGN invariant 13): a full store disk is
// ENOSPC for writers, never a crash, and a legal system call never makes
// a record the journal refuses.

// fullDiskOpTimeout bounds every file operation on the mount: a daemon
// that died or hangs must fail the test, not stall it.
const fullDiskOpTimeout = 20 * time.Second

// withDeadline runs op in a goroutine and fails the test if it takes
// longer than fullDiskOpTimeout.
func withDeadline(t *testing.T, what string, op func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return err
	case <-time.After(fullDiskOpTimeout):
		t.Fatalf("%s: no answer after %v (daemon hung?)", what, fullDiskOpTimeout)
		return nil
	}
}

// smallTmpfs mounts a tmpfs of size bytes under the test's temp dir and
// unmounts it when the test ends (after the mounts registered later).
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "mounting a tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		skipOrFail(t, "mount -t tmpfs -o size=%s: %v", size, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("umount %s: %v; detaching", dir, err)
			_ = unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	return dir
}

// mountWithStore mounts dir with its store at store (mountProject puts it
// under t.TempDir()).
func mountWithStore(t *testing.T, dir, store string) *Mount {
	t.Helper()
	requireFUSE(t)
	m := &Mount{t: t, Dir: dir, Store: store, env: testEnv(t)}
	t.Cleanup(m.cleanup)
	m.Mount()
	return m
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// writeOnMount writes a file on the mount; write and close errors both
// count (a buffered write may only fail at close).
func writeOnMount(t *testing.T, path string, data []byte) error {
	t.Helper()
	return withDeadline(t, "write "+filepath.Base(path), func() error {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		_, werr := f.Write(data)
		cerr := f.Close()
		return errors.Join(werr, cerr)
	})
}

func mustRun(t *testing.T, m *Mount, args ...string) string {
	t.Helper()
	r := m.Run(append([]string{args[0], "--store", m.Store}, args[1:]...)...)
	if r.Code != 0 {
		t.Fatalf("reynfs %s while the disk is full: exit %d: %s%s\nlog:\n%s",
			strings.Join(args, " "), r.Code, r.Stderr, r.Stdout, m.LogTail(10))
	}
	return r.Stdout
}

// TestFullDiskENOSPC: the store on a 64 MiB tmpfs, the workspace filled
// until writes fail. Writers get ENOSPC (not ENOTCONN or EIO: the daemon
// used to die of SIGBUS in Badger's mapped value log), the daemon and
// status, log, checkpoint and rewind keep working, writes resume once space
// is freed on the tmpfs, and the unmount writes the project back intact.
func TestFullDiskENOSPC(t *testing.T) {
	requireFUSE(t)
	disk := smallTmpfs(t, "64m")
	proj := filepath.Join(t.TempDir(), "proj")
	writeFile(t, filepath.Join(proj, "keep.txt"), []byte("precious\n"), 0o644)
	m := mountWithStore(t, proj, filepath.Join(disk, "store"))

	// Ballast on the same file system, freed later to make room again.
	ballast := filepath.Join(disk, "ballast")
	if err := os.WriteFile(ballast, randomBytes(t, 16<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	mustRun(t, m, "checkpoint", "-m", "before-fill")

	const chunk = 1 << 20
	var fillErr error
	filled := 0
	for i := 0; i < 64; i++ {
		if fillErr = writeOnMount(t, filepath.Join(proj, fmt.Sprintf("fill-%02d", i)), randomBytes(t, chunk)); fillErr != nil {
			break
		}
		filled++
	}
	if fillErr == nil {
		t.Fatalf("wrote %d MiB to a workspace whose store has 64 MiB without an error", filled)
	}
	if !errors.Is(fillErr, syscall.ENOSPC) {
		t.Fatalf("after %d MiB the write failed with %v, want ENOSPC\nlog:\n%s", filled, fillErr, m.LogTail(10))
	}
	t.Logf("ENOSPC after %d MiB", filled)
	if !pidAlive(m.pid) {
		t.Fatalf("daemon %d died on the full disk\nlog:\n%s", m.pid, m.LogTail(10))
	}
	// Still full: a second writer gets ENOSPC too, and reads work. The
	// failed write's buffers go back to the free space, so the second
	// writer may fit a few MiB first (the daemon logged "full" and "has
	// space again" in one instant, 12.5 MB free against a 9.4 MB
	// reserve); it must still hit ENOSPC well before the disk's size.
	var againErr error
	again := 0
	for ; again < 16 && againErr == nil; again++ {
		againErr = writeOnMount(t, filepath.Join(proj, fmt.Sprintf("again-%02d", again)), randomBytes(t, chunk))
	}
	if !errors.Is(againErr, syscall.ENOSPC) {
		t.Fatalf("second writer on the full disk: %d MiB written, then %v; want ENOSPC\nlog:\n%s", again, againErr, m.LogTail(10))
	}
	t.Logf("second writer: ENOSPC after %d MiB", again-1)
	if err := withDeadline(t, "read keep.txt", func() error {
		b, err := os.ReadFile(filepath.Join(proj, "keep.txt"))
		if err == nil && string(b) != "precious\n" {
			err = fmt.Errorf("keep.txt reads %q", b)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// The control plane works while the disk is full.
	mustRun(t, m, "status")
	mustRun(t, m, "log")
	mustRun(t, m, "checkpoint", "-m", "while-full")
	if err := withDeadline(t, "remove fill-00", func() error { return os.Remove(filepath.Join(proj, "fill-00")) }); err != nil {
		t.Fatalf("rm on the full disk: %v", err)
	}
	mustRun(t, m, "rewind", "--", "before-fill")
	if _, err := os.Stat(filepath.Join(proj, "fill-01")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("fill-01 after rewinding to before-fill: %v, want ENOENT", err)
	}

	// Space comes back on the store's file system: writes resume.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	after := randomBytes(t, chunk)
	if err := writeOnMount(t, filepath.Join(proj, "after.bin"), after); err != nil {
		t.Fatalf("write after freeing 16 MiB on the store's disk: %v\nlog:\n%s", err, m.LogTail(10))
	}

	m.Unmount()
	if b, err := os.ReadFile(filepath.Join(proj, "keep.txt")); err != nil || string(b) != "precious\n" {
		t.Errorf("keep.txt after unmount: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(proj, "after.bin")); err != nil || !bytes.Equal(b, after) {
		t.Errorf("after.bin after unmount: %d bytes, %v; want the %d bytes written", len(b), err, len(after))
	}
	if _, err := os.Stat(filepath.Join(proj, "fill-01")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("fill-01 (rewound away) after unmount: %v, want ENOENT", err)
	}
}

// TestPunchHoleHugeSparse: fallocate --punch-hole over a 40 GiB sparse
// file used to make a 22.9 MB record that the journal refused after the
// change was applied, and the mount went read-only for good; a truncate to
// 1 TiB made the next generation cut fail the same way.
func TestPunchHoleHugeSparse(t *testing.T) {
	requireFUSE(t)
	proj := filepath.Join(t.TempDir(), "proj")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	m := mountProject(t, proj)
	const size = 40 << 30
	big := filepath.Join(proj, "big")
	err := withDeadline(t, "punch", func() error {
		f, err := os.Create(big)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Truncate(size); err != nil {
			return err
		}
		if _, err := f.WriteAt([]byte("data in the middle"), size/2); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		mode := uint32(unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE)
		if err := unix.Fallocate(int(f.Fd()), mode, 0, size); err != nil {
			return fmt.Errorf("fallocate --punch-hole over 40 GiB: %w", err)
		}
		return f.Sync()
	})
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, m.LogTail(10))
	}
	// A generation cut stores the 40 GiB file's inode object (20 MiB of
	// chunk hashes); a size whose object Badger could not hold is EFBIG
	// at the truncate, not a failed cut and a read-only mount later.
	if r := m.Run("checkpoint", "--store", m.Store, "-m", "sparse"); r.Code != 0 {
		t.Fatalf("checkpoint with a 40 GiB sparse file: exit %d: %s\nlog:\n%s", r.Code, r.Stderr, m.LogTail(10))
	}
	if err := withDeadline(t, "truncate 1 TiB", func() error { return os.Truncate(big, 1<<40) }); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("truncate to 1 TiB: %v, want EFBIG", err)
	}
	if err := writeOnMount(t, filepath.Join(proj, "after"), []byte("still writable\n")); err != nil {
		t.Fatalf("write after the punch: %v (mount read-only?)\nlog:\n%s", err, m.LogTail(10))
	}
	err = withDeadline(t, "read the punched range", func() error {
		f, err := os.Open(big)
		if err != nil {
			return err
		}
		defer f.Close()
		buf := make([]byte, 18)
		if _, err := f.ReadAt(buf, size/2); err != nil {
			return err
		}
		if !bytes.Equal(buf, make([]byte, len(buf))) {
			return fmt.Errorf("punched range reads %q, want zeros", buf)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(big); err != nil { // the write-back would copy 40 GiB of zeros otherwise
		t.Fatal(err)
	}
	m.Unmount()
	if b, err := os.ReadFile(filepath.Join(proj, "after")); err != nil || string(b) != "still writable\n" {
		t.Errorf("after unmount: %q, %v", b, err)
	}
}

// TestFullDiskUnmount: an unmount on a full store disk still cuts its last
// generation and writes the workspace back (the reserve is for this),
// every file whose write succeeded is in the project directory afterwards,
// log and gc work on the still full disk, and the workspace mounts again.
func TestFullDiskUnmount(t *testing.T) {
	requireFUSE(t)
	disk := smallTmpfs(t, "64m")
	proj := filepath.Join(t.TempDir(), "proj")
	writeFile(t, filepath.Join(proj, "keep.txt"), []byte("precious\n"), 0o644)
	m := mountWithStore(t, proj, filepath.Join(disk, "store"))

	written := map[string][]byte{}
	var err error
	for i := 0; i < 64 && err == nil; i++ {
		name := fmt.Sprintf("fill-%02d", i)
		data := randomBytes(t, 1<<20)
		if err = writeOnMount(t, filepath.Join(proj, name), data); err == nil {
			written[name] = data
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the workspace ended with %v, want ENOSPC", err)
	}
	// A small file that is still being written (buffered) when the
	// unmount comes.
	if err := writeOnMount(t, filepath.Join(proj, "small"), []byte("x")); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("small write on the full disk: %v", err)
	}
	m.Unmount()
	// log on the unmounted store, and gc (which runs only there), work on
	// the full disk.
	for _, args := range [][]string{
		{"log", "--store", m.Store, "--dir", proj},
		{"gc", "--keep", "1", "--store", m.Store, "--dir", proj},
	} {
		if r := m.Run(args...); r.Code != 0 {
			t.Errorf("reynfs %s on the full disk: exit %d: %s", strings.Join(args, " "), r.Code, r.Stderr)
		}
	}
	if b, err := os.ReadFile(filepath.Join(proj, "keep.txt")); err != nil || string(b) != "precious\n" {
		t.Errorf("keep.txt after unmount: %q, %v", b, err)
	}
	for name, data := range written {
		if b, err := os.ReadFile(filepath.Join(proj, name)); err != nil || !bytes.Equal(b, data) {
			t.Errorf("%s after unmount: %d bytes, %v; want the %d bytes written", name, len(b), err, len(data))
		}
	}
	// Mounting again on the still full disk works, and writers get ENOSPC
	// again before the disk runs out (how many MiB the remount admits
	// first depends on what Badger had preallocated and compacted), and
	// then every acknowledged byte is there.
	m.Mount()
	err = nil
	for i := 0; i < 64 && err == nil; i++ {
		name := fmt.Sprintf("more-%02d", i)
		data := randomBytes(t, 1<<20)
		if err = writeOnMount(t, filepath.Join(proj, name), data); err == nil {
			written[name] = data
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("writes after mounting on the full disk ended with %v, want ENOSPC", err)
	}
	m.Unmount()
	for name, data := range written {
		if b, err := os.ReadFile(filepath.Join(proj, name)); err != nil || !bytes.Equal(b, data) {
			t.Errorf("%s after the second unmount: %d bytes, %v; want the %d bytes written", name, len(b), err, len(data))
		}
	}
}
