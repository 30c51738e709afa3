package integration

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// damageProject fills a project directory with files of random content
// (about 1.2 MB, so the value log holds real data) and returns them.
func damageProject(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	files := map[string][]byte{}
	for i := range 8 {
		data := make([]byte, 120_000+i*10_000)
		for k := range data {
			data[k] = byte(rng.Uint32())
		}
		name := "f" + strconv.Itoa(i)
		files[name] = data
		writeFile(t, filepath.Join(dir, name), data, 0o644)
	}
	files["small.txt"] = []byte("small\n")
	writeFile(t, filepath.Join(dir, "small.txt"), files["small.txt"], 0o644)
	return dir, files
}

// historyThenKill mounts the project, adds history (a file written in the
// mount, then a checkpoint, synced), with a clean unmount and remount
// first when tables are wanted (Badger writes an .sst when it closes),
// then kills the daemon with SIGKILL. The dead mount stays until the
// test's cleanup. It returns the mount and every file of the head state.
func historyThenKill(t *testing.T, dir string, files map[string][]byte, tables bool) (*Mount, map[string][]byte) {
	t.Helper()
	m := mountProject(t, dir)
	m.skipFsck = true // the test damages the store on purpose
	if tables {
		m.Unmount()
		m.Mount()
	}
	head := map[string][]byte{"later.txt": bytes.Repeat([]byte("later history\n"), 20_000)}
	for i := range 40 { // many small commits: the WAL's tail is history
		head["later"+strconv.Itoa(i)] = []byte(strings.Repeat("later file "+strconv.Itoa(i)+"\n", 10))
	}
	for k, v := range head {
		writeFile(t, filepath.Join(dir, k), v, 0o644)
	}
	for k, v := range files {
		head[k] = v
	}
	if r := m.Run("checkpoint", "-m", "before damage", "--store", m.Store); r.Code != 0 {
		t.Fatalf("checkpoint: exit %d: %s", r.Code, r.Stderr)
	}
	m.Kill9()
	return m, head
}

// storeFiles fingerprints every regular file of the store except the
// daemon's log (which a refused mount appends its one line to): size,
// mtime and ctime, and a hash of its data extents (Badger's files are
// large and sparse; holes read as zeros and are skipped).
func storeFiles(t *testing.T, store string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(store, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() || e.Name() == "reynfs.log" {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return err
		}
		// The fingerprint is every non-zero 4 KiB block with its offset.
		// Not the data extents' bytes: the extents of zeros shift without
		// a write (ext4's SEEK_DATA counts the cached pages of an unwritten
		// extent as data, so a read-only mmap of a preallocated .mem or
		// DISCARD, or the writeback of a killed daemon's pages, moved them:
		// 1 run in 4 failed on an unchanged store).
		h := sha256.New()
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		blk := make([]byte, 4096)
		for _, x := range dataExtents(t, p) {
			for off := x[0] &^ 4095; off < x[1]; off += 4096 {
				n, err := f.ReadAt(blk, off)
				if err != nil && err != io.EOF {
					return err
				}
				if !bytes.Equal(blk[:n], make([]byte, n)) {
					fmt.Fprintf(h, "%d:", off)
					h.Write(blk[:n])
				}
			}
		}
		out[p] = fmt.Sprintf("size %d mtime %d.%d ctime %d.%d data %x", st.Size, st.Mtim.Sec, st.Mtim.Nsec,
			st.Ctim.Sec, st.Ctim.Nsec, h.Sum(nil)[:8])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dataExtents lists a file's data ranges [start, end) (SEEK_DATA/SEEK_HOLE).
func dataExtents(t *testing.T, path string) [][2]int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]int64
	for off := int64(0); off < fi.Size(); {
		data, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if err != nil {
			break // ENXIO: no data after off
		}
		hole, err := unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			hole = fi.Size()
		}
		out = append(out, [2]int64{data, hole})
		off = hole
	}
	return out
}

func sameFiles(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for p, s := range before {
		if after[p] != s {
			t.Errorf("%s changed the store: %s (before %s, after %q)", what, p, s, after[p])
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s added %s to the store", what, p)
		}
	}
}

// noTrace fails if a command's output shows a Go panic or stack trace, or
// its error is more than one line.
func noTrace(t *testing.T, what string, r Result) {
	t.Helper()
	all := r.Stdout + r.Stderr
	for _, bad := range []string{"panic", "goroutine ", ".go:", "runtime."} {
		if strings.Contains(all, bad) {
			t.Errorf("%s printed %q:\n%s", what, bad, all)
		}
	}
	if r.Code != 0 && strings.Count(strings.TrimSpace(r.Stderr), "\n") > 0 {
		t.Errorf("%s: error is not one line:\n%s", what, r.Stderr)
	}
}

// dataEnd returns the offset past the last non-zero byte of a file.
func dataEnd(t *testing.T, path string) int64 {
	t.Helper()
	xs := dataExtents(t, path)
	if len(xs) == 0 {
		return 0
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := len(xs) - 1; i >= 0; i-- {
		b := make([]byte, xs[i][1]-xs[i][0])
		if _, err := f.ReadAt(b, xs[i][0]); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		for k := len(b) - 1; k >= 0; k-- {
			if b[k] != 0 {
				return xs[i][0] + int64(k) + 1
			}
		}
	}
	return 0
}

// newestFile returns the store's db file with that suffix and the highest
// number, "" if none.
func newestFile(t *testing.T, store, suffix string) string {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join(store, "db", "*"+suffix))
	sort.Strings(ms)
	for i := len(ms) - 1; i >= 0; i-- {
		if fi, err := os.Stat(ms[i]); err == nil && fi.Size() > 0 {
			return ms[i]
		}
	}
	return ""
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 8)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] ^= 0x5a
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedStore damages a store with history after kill -9 of its
// daemon, at chosen places, and checks that reynfs refuses it (exit 4, one
// line, no trace, nothing of the store written, the project not
// re-imported), that look-only commands do not modify it, and that fsck
// reports the damage and salvages what is readable.
func TestDamagedStore(t *testing.T) {
	cases := []struct {
		name   string
		tables bool
		damage func(t *testing.T, store string)
		want   string // in mount's error
	}{
		{"seg-truncate", false, func(t *testing.T, store string) {
			ms, _ := filepath.Glob(filepath.Join(journal.LogPath(filepath.Join(store, "db")), "*.seg"))
			if len(ms) == 0 {
				t.Fatal("no log segment")
			}
			// Into the last frame: it ends before the zeros pre-written
			// past it (cas/prefill.go), which a kill -9 leaves.
			if err := os.Truncate(ms[len(ms)-1], dataEnd(t, ms[len(ms)-1])-16); err != nil {
				t.Fatal(err)
			}
		}, ".seg"},
		{"wal-flip", false, func(t *testing.T, store string) {
			w := newestFile(t, store, ".mem")
			flip(t, w, dataEnd(t, w)*9/10)
		}, ".mem"},
		{"sst-truncate", true, func(t *testing.T, store string) {
			s := newestFile(t, store, ".sst")
			if s == "" {
				t.Fatal("no .sst table after a clean unmount")
			}
			fi, _ := os.Stat(s)
			if err := os.Truncate(s, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, ".sst"},
		{"sst-flip", true, func(t *testing.T, store string) {
			s := newestFile(t, store, ".sst")
			fi, _ := os.Stat(s)
			flip(t, s, fi.Size()/4)
		}, "corrupt"},
		{"db-gone", false, func(t *testing.T, store string) {
			if err := os.RemoveAll(filepath.Join(store, "db")); err != nil {
				t.Fatal(err)
			}
		}, "lost acknowledged history"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, files := damageProject(t)
			m, head := historyThenKill(t, dir, files, c.tables)
			c.damage(t, m.Store)
			before := storeFiles(t, m.Store)

			r := m.Run("mount", dir, "--store", m.Store)
			noTrace(t, "mount", r)
			if r.Code != 4 || !strings.Contains(r.Stderr, c.want) {
				t.Fatalf("mount of a damaged store: exit %d, stderr %q; want exit 4 naming %q", r.Code, r.Stderr, c.want)
			}
			t.Logf("mount refused: %s", strings.TrimSpace(r.Stderr))
			if isMounted(dir) {
				t.Fatal("the damaged store was mounted")
			}
			sameFiles(t, "a refused mount", before, storeFiles(t, m.Store))
			if _, err := os.Stat(filepath.Join(m.Store, "db")); c.name == "db-gone" && err == nil {
				t.Fatal("the refused mount created a new store (a new timeline)")
			}
			for name, want := range files { // the project directory is as it was
				if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("project file %s changed after the refused mount (%v)", name, err)
				}
			}

			for _, args := range [][]string{{"status", dir}, {"log", "--dir", dir}} {
				r := m.Run(append(args, "--store", m.Store)...)
				noTrace(t, args[0], r)
				if r.Code != 4 && r.Code != 2 {
					t.Errorf("%s on a damaged store: exit %d (%s), want 4", args[0], r.Code, r.Stderr)
				}
				sameFiles(t, args[0], before, storeFiles(t, m.Store))
			}

			out := filepath.Join(t.TempDir(), "salvage")
			r = m.Run("fsck", "--store", m.Store, "--salvage", out)
			noTrace(t, "fsck", r)
			sameFiles(t, "fsck", before, storeFiles(t, m.Store))
			switch r.Code {
			case 4: // nothing readable: the error says why
				if !strings.Contains(r.Stderr, "corrupt") {
					t.Errorf("fsck exit 4 without saying why: %s", r.Stderr)
				}
				return
			case 1:
			default:
				t.Fatalf("fsck of a damaged store: exit %d, want 1 or 4\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			if !strings.Contains(r.Stdout, "DAMAGE") {
				t.Errorf("fsck exit 1 names no damage:\n%s", r.Stdout)
			}
			salvaged := 0
			for name, want := range head {
				if got, err := os.ReadFile(filepath.Join(out, name)); err == nil && bytes.Equal(got, want) {
					salvaged++
				}
			}
			if salvaged < len(head)/2 {
				t.Errorf("fsck --salvage recovered %d of %d files intact:\n%s", salvaged, len(head), r.Stdout)
			}
			t.Logf("fsck: exit %d, %d of %d files salvaged intact", r.Code, salvaged, len(head))
		})
	}
}

// TestBadChunkIsEIO plants an object whose bytes do not match its hash (a
// chunk of one file) in an unmounted store: reading that file through the
// mount is EIO with a log line naming the inode and hash, every other file
// reads, and fsck names the path.
func TestBadChunkIsEIO(t *testing.T) {
	dir, files := damageProject(t)
	m := mountProject(t, dir)
	m.skipFsck = true
	m.Unmount()

	victim := files["f3"]
	h := cas.Sum(victim[:cas.ChunkSize])
	j, err := journal.Open(filepath.Join(m.Store, "db"), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), victim[:cas.ChunkSize]...)
	bad[100] ^= 1
	err = j.DB().Update(func(txn *badger.Txn) error { return txn.Set(cas.Key(h), bad) })
	if cerr := j.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	m.Mount()
	_, err = os.ReadFile(filepath.Join(dir, "f3"))
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("reading a file with a bad chunk: %v, want EIO", err)
	}
	for name, want := range files {
		if name == "f3" {
			continue
		}
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s, which shares no chunk with the damage: %v", name, err)
		}
	}
	if !strings.Contains(m.Log(), h.String()) {
		t.Errorf("daemon log does not name the bad chunk %s:\n%s", h, m.LogTail(5))
	}
	r := m.Run("fsck", "--store", m.Store) // refused while mounted
	noTrace(t, "fsck of a mounted store", r)
	if r.Code != 3 || !strings.Contains(r.Stderr, "unmount") {
		t.Errorf("fsck of a mounted store: exit %d (%s), want 3 asking to unmount", r.Code, r.Stderr)
	}
	m.Unmount()

	r = m.Run("fsck", "--store", m.Store)
	noTrace(t, "fsck", r)
	if r.Code != 1 || !strings.Contains(r.Stdout, "/f3") || !strings.Contains(r.Stdout, h.Short()) {
		t.Fatalf("fsck: exit %d, want 1 naming /f3 and %s:\n%s%s", r.Code, h.Short(), r.Stdout, r.Stderr)
	}
}

// TestLookOnlyCommandsDoNotWrite runs every look-only command on a store
// its daemon left unclosed (kill -9): they answer, and not a byte of the
// store changes (a writable open would replay and truncate its logs).
// The store then mounts, and its generations are all there.
func TestLookOnlyCommandsDoNotWrite(t *testing.T) {
	dir, files := damageProject(t)
	m, head := historyThenKill(t, dir, files, false)
	m.skipFsck = false // undamaged: cleanup's fsck must find it clean
	// The dead daemon's mount is stale: every command but unmount says so
	// and opens no store (TestStaleMount). Detach it as `reynfs unmount`
	// would, leaving the store as the kill left it.
	if err := syscall.Unmount(m.Dir, syscall.MNT_DETACH); err != nil {
		t.Fatalf("detach the dead mount: %v", err)
	}
	before := storeFiles(t, m.Store)
	out := filepath.Join(t.TempDir(), "export")
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"status", dir}, 5},
		{[]string{"log", "--all", "--wal"}, 0},
		{[]string{"show", "g2"}, 0},
		{[]string{"diff", "g1", "g2"}, 0},
		{[]string{"export", "g2", out}, 0},
		{[]string{"agent", "list"}, 0},
		{[]string{"rewind", "g1", "--dry-run"}, 0},
		{[]string{"fsck"}, 0},
	} {
		r := m.Run(append(c.args, "--store", m.Store)...)
		noTrace(t, c.args[0], r)
		if r.Code != c.code {
			t.Errorf("reynfs %s: exit %d, want %d: %s", strings.Join(c.args, " "), r.Code, c.code, r.Stderr)
		}
		sameFiles(t, "reynfs "+strings.Join(c.args, " "), before, storeFiles(t, m.Store))
	}
	if got, err := os.ReadFile(filepath.Join(out, "later.txt")); err != nil || !bytes.Equal(got, head["later.txt"]) {
		t.Errorf("export of g2 from the unclosed store: later.txt %v", err)
	}
	m.Mount()
	if got, err := os.ReadFile(filepath.Join(dir, "later.txt")); err != nil || !bytes.Equal(got, head["later.txt"]) {
		t.Errorf("after the look-only commands the mount lost later.txt: %v", err)
	}
	m.Unmount()
}
