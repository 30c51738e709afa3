package integration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The FUSE settings of issue 11 part 6. With FUSE_HANDLE_KILLPRIV_V2 the
// kernel stops clearing suid/sgid and security.capability itself and
// leaves it to reynfs (fs/killpriv.go); each test here does the same
// thing in the mount and in a directory of the host file system (ext4)
// and compares what stat and getxattr report.

// killPrivScript makes files with suid/sgid and changes them the ways
// that clear (or keep) those bits, as root and as user nobody.
const killPrivScript = `
NB="setpriv --reuid=65534 --regid=65534 --clear-groups"
mk() { rm -f "$1"; printf abc > "$1"; chmod "$2" "$1"; }
mk write 6777; $NB sh -c 'printf x >> write'
mk write-sgid-nogx 2767; $NB sh -c 'printf x >> write-sgid-nogx'
mk write-again 6777; $NB sh -c 'printf x >> write-again'; chmod 6777 write-again; $NB sh -c 'printf y >> write-again'
mk write-root 6777; printf x >> write-root
mk truncate 6777; $NB truncate -s 1 truncate
mk truncate-root 6777; truncate -s 1 truncate-root
mk open-trunc 6777; $NB sh -c ': > open-trunc'
mk fallocate 6777; $NB fallocate -l 8192 fallocate
mk chown 6777; chown 65534 chown
mk chown-sgid-nogx 2767; chown 65534 chown-sgid-nogx
mk chmod 6777; chmod 6755 chmod
mk plain 0777; $NB sh -c 'printf x >> plain'
mkdir dir; chmod 2777 dir; chown 65534 dir
mk chown-same 6777
`

// vfsCapNetRaw is a security.capability value (VFS_CAP_REVISION_2,
// effective) granting CAP_NET_RAW, what setcap cap_net_raw+ep writes.
func vfsCapNetRaw() []byte {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000000|1)
	binary.LittleEndian.PutUint32(b[4:], 1<<13)
	return b
}

// killPrivState runs the script in dir, then the cases that need a file
// capability, and returns every file's mode and whether it kept its
// capability, sorted.
func killPrivState(t *testing.T, dir string) string {
	t.Helper()
	shTimeout(t, dir, killPrivScript)
	// chown(f, -1, -1) by root clears suid on ext4 too.
	if err := os.Chown(filepath.Join(dir, "chown-same"), -1, -1); err != nil {
		t.Fatal(err)
	}
	caps := map[string]func(p string) error{
		"cap-write-root": func(p string) error {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			_, err = f.Write([]byte("x"))
			return errors.Join(err, f.Close())
		},
		"cap-truncate-root": func(p string) error { return os.Truncate(p, 1) },
		"cap-chown":         func(p string) error { return os.Chown(p, 65534, -1) },
		"cap-write-nobody": func(p string) error {
			out, err := asNobody(dir, "printf x >> "+filepath.Base(p))
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		},
		"cap-chmod": func(p string) error { return os.Chmod(p, 0o775) },
	}
	for name, act := range caps {
		p := filepath.Join(dir, name)
		writeFile(t, p, []byte("abc"), 0o757)
		if err := os.Chmod(p, 0o757); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setxattr(p, "security.capability", vfsCapNetRaw(), 0); err != nil {
			skipOrFail(t, "setxattr security.capability in %s: %v", dir, err)
		}
		if err := act(p); err != nil {
			t.Fatalf("%s in %s: %v", name, dir, err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		_, err := unix.Getxattr(p, "security.capability", nil)
		lines = append(lines, fmt.Sprintf("%s %06o cap=%v", e.Name(), st.Mode, err == nil))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// TestKillPrivLikeExt4: writes, truncates, fallocate and chown clear
// suid, sgid and security.capability in the mount exactly as on the host
// file system, for user nobody and for root, now that the kernel leaves
// it to reynfs (FUSE_HANDLE_KILLPRIV_V2). Without fs/killpriv.go, nobody's
// write, truncate and fallocate keep suid here; and reynfs before it kept
// sgid without group execute that ext4 clears for a caller outside the
// group.
func TestKillPrivLikeExt4(t *testing.T) {
	requireNobody(t)
	requireTool(t, "fallocate")
	requireTool(t, "truncate")
	native := t.TempDir()
	proj := t.TempDir()
	for _, d := range []string{native, proj} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
		traversable(t, d)
	}
	m := mountProject(t, proj)
	want := killPrivState(t, native)
	if !strings.Contains(want, "write 100777") || !strings.Contains(want, "write-root 106777") {
		t.Fatalf("the host file system does not clear suid as ext4 does; nothing to compare with:\n%s", want)
	}
	if got := killPrivState(t, m.Dir); got != want {
		t.Errorf("suid/sgid/capability in the mount differ from the host directory:\n%s", lineDiff(want, got))
	}
	// What the kernel showed came from the daemon: a fresh mount agrees.
	m.Unmount()
	m.Mount()
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(m.Dir, "write"), &st); err != nil || st.Mode != syscall.S_IFREG|0o777 {
		t.Errorf("after a remount, nobody's write to a 6777 file shows mode %06o (%v), want 100777", st.Mode, err)
	}
}

// resident returns how many of the pages of the file at p are in the
// page cache (mincore over a read-only mapping), and the page count; it
// logs the page ranges that are not.
func resident(t *testing.T, p string) (int, int) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	size := int(fi.Size())
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap %s: %v", p, err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (size+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore %s: %v", p, e)
	}
	n := 0
	var missing []string
	for i := 0; i < len(vec); i++ {
		if vec[i]&1 != 0 {
			n++
			continue
		}
		j := i
		for j+1 < len(vec) && vec[j+1]&1 == 0 {
			j++
		}
		missing = append(missing, fmt.Sprintf("%d-%d", i, j))
		i = j
	}
	if len(missing) > 0 {
		t.Logf("%s: pages not in the page cache (of %d): %s", p, len(vec), strings.Join(missing, " "))
	}
	return n, len(vec)
}

// TestPageCacheSurvives: a file written through the mount stays in the
// kernel's page cache across stat (the attribute refresh that sees its new
// mtime), close and a new open, so reading it back is served by the
// kernel without a READ request (FOPEN_KEEP_CACHE and
// EXPLICIT_INVAL_DATA; with AUTO_INVAL_DATA the kernel drops the pages
// when the refreshed mtime differs from the one it had). A rewind still
// replaces what the cache holds (TestRewindCacheCoherence covers that).
func TestPageCacheSurvives(t *testing.T) {
	m := mountProject(t, t.TempDir())
	p := filepath.Join(m.Dir, "written")
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil { // the attribute refresh
		t.Fatal(err)
	}
	if n, all := resident(t, p); !mostResident(n, all) {
		t.Errorf("after write, stat, reopen: %d of %d pages in the page cache, want all (the kernel dropped what was just written)", n, all)
	}
	got, err := os.ReadFile(p)
	if err != nil || string(got) != string(data) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(data))
	}
	// A file read once is served from the cache at the next open.
	q := filepath.Join(m.Dir, "read")
	writeFile(t, q, data[:1<<20], 0o644)
	m.Unmount()
	m.Mount()
	if _, err := os.ReadFile(q); err != nil {
		t.Fatal(err)
	}
	if n, all := resident(t, q); !mostResident(n, all) {
		t.Errorf("after a read and a reopen: %d of %d pages in the page cache, want all", n, all)
	}
}

// mostResident: what the mount's settings decide is whether the kernel
// keeps a file's pages or drops them all (AUTO_INVAL_DATA on a changed
// mtime, an open without FOPEN_KEEP_CACHE). Which few pages it keeps
// beyond that is the kernel's: one CI run of the first check found 2039
// of 2048 (2026-12-04, not seen in 100 runs after), so up to 1/64 of the
// pages may be missing (resident logs which).
func mostResident(n, all int) bool {
	return n >= all-all/64
}

// TestReadaheadRaised: as root the mount's readahead is four READs of
// max_read (512 KiB, fs/splice.go; the kernel offers FUSE 128 KiB), so a sequential reader costs
// a quarter of the READ round trips and keeps several in flight; the file
// still reads back whole.
func TestReadaheadRaised(t *testing.T) {
	if os.Geteuid() != 0 {
		skipOrFail(t, "raising a mount's readahead in sysfs needs root")
	}
	m := mountProject(t, t.TempDir())
	var st unix.Stat_t
	if err := unix.Stat(m.Dir, &st); err != nil {
		t.Fatal(err)
	}
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	b, err := os.ReadFile(p)
	if err != nil {
		skipOrFail(t, "no backing-device readahead for the mount: %v", err)
	}
	if got, want := strings.TrimSpace(string(b)), fmt.Sprint(4*mountMaxRead(t, m.Dir)>>10); got != want {
		t.Errorf("%s = %s, want %s (four READs of max_read)", p, got, want)
	}
	data := make([]byte, 3<<20+5)
	for i := range data {
		data[i] = byte(i % 251)
	}
	writeFile(t, filepath.Join(m.Dir, "seq"), data, 0o644)
	m.Unmount()
	m.Mount() // a cold page cache: the read goes through readahead
	got, err := os.ReadFile(filepath.Join(m.Dir, "seq"))
	if err != nil || string(got) != string(data) {
		t.Errorf("sequential read back: %d bytes, %v; want the %d written", len(got), err, len(data))
	}
}

// TestSymlinkCacheRewind: with the kernel caching symlink targets
// (CACHE_SYMLINKS), readlink after a rewind shows the rewound target,
// whether the rewind brings back the old link or changes one the kernel
// has read.
func TestSymlinkCacheRewind(t *testing.T) {
	m := mountProject(t, t.TempDir())
	link := filepath.Join(m.Dir, "link")
	readlink := func(when, want string) {
		t.Helper()
		for i := 0; i < 3; i++ { // the second and third come from the cache
			if got, err := os.Readlink(link); err != nil || got != want {
				t.Fatalf("%s: readlink = %q, %v; want %q", when, got, err, want)
			}
		}
	}
	if err := os.Symlink("target-a", link); err != nil {
		t.Fatal(err)
	}
	readlink("before the checkpoint", "target-a")
	rwCheckpoint(t, m, "a")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target-b-longer", link); err != nil {
		t.Fatal(err)
	}
	readlink("in the future", "target-b-longer")
	rwCheckpoint(t, m, "b")
	rwRewind(t, m, "a")
	readlink("after rewind to a", "target-a")
	rwRewind(t, m, "b")
	readlink("after rewind to b", "target-b-longer")
}

// TestDirCacheRewind: with the kernel caching directory listings across
// opens (FOPEN_CACHE_DIR), a listing after a rewind is the rewound one,
// also when a directory handle opened before the rewind reads first (it
// would otherwise fill the emptied cache with the discarded future).
func TestDirCacheRewind(t *testing.T) {
	m := mountProject(t, t.TempDir())
	d := filepath.Join(m.Dir, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		writeFile(t, filepath.Join(d, n), []byte(n), 0o644)
	}
	names := func(f *os.File) string {
		t.Helper()
		if _, err := f.Seek(0, 0); err != nil {
			t.Fatal(err)
		}
		ns, err := f.Readdirnames(-1)
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(ns)
		return strings.Join(ns, " ")
	}
	list := func() string {
		t.Helper()
		f, err := os.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return names(f)
	}
	if got := list(); got != "a b" {
		t.Fatalf("listing = %q, want a b", got)
	}
	rwCheckpoint(t, m, "ab")
	writeFile(t, filepath.Join(d, "c"), []byte("c"), 0o644)
	if err := os.Remove(filepath.Join(d, "a")); err != nil {
		t.Fatal(err)
	}
	if got := list(); got != "b c" { // now cached by the kernel
		t.Fatalf("listing in the future = %q, want b c", got)
	}
	old, err := os.Open(d) // opened in the future, read after the rewind
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	rwRewind(t, m, "ab")
	if got := names(old); got != "a b" {
		t.Errorf("a handle from before the rewind lists %q after it, want a b", got)
	}
	for i := 0; i < 2; i++ { // the second from the kernel's cache
		if got := list(); got != "a b" {
			t.Errorf("listing %d after the rewind = %q, want a b", i+1, got)
		}
	}
	if out := shTimeout(t, d, "ls"); out != "a\nb\n" {
		t.Errorf("ls after the rewind = %q, want a, b", out)
	}
}
