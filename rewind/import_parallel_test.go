package rewind

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
)

// mixedTree writes a tree with what the pipeline must keep in walk order:
// many small files (equal contents among them), files of one chunk, just
// over one and several, an empty and a sparse file, hard links whose first
// name the walk meets in another directory, symlinks (one out of the
// tree), a FIFO, xattrs and an empty directory.
func mixedTree(t *testing.T, dir string) {
	t.Helper()
	for d := range 12 {
		for f := range 15 {
			var data []byte
			switch f {
			case 0:
			case 1:
				data = make([]byte, cas.ChunkSize)
				rand.Read(data)
			case 2:
				data = make([]byte, 3*cas.ChunkSize+17)
				rand.Read(data)
			case 3:
				data = []byte("the same in every directory\n")
			default:
				data = fmt.Appendf(nil, "file %d of directory %d\n", f, d)
			}
			p := filepath.Join(dir, fmt.Sprintf("d%02d", d), fmt.Sprintf("f%02d", f))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, l := range [][2]string{{"d07/f04", "d00/link"}, {"d07/f04", "d07/again"}, {"d03/f02", "d11/big-link"}} {
		if err := os.Link(filepath.Join(dir, l[0]), filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	sparse, err := os.Create(filepath.Join(dir, "d05", "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sparse.WriteAt([]byte("data in the middle"), 8*cas.ChunkSize+5); err != nil {
		t.Fatal(err)
	}
	if err := sparse.Truncate(20 * cas.ChunkSize); err != nil {
		t.Fatal(err)
	}
	sparse.Close()
	for _, l := range [][2]string{{"f05", "d01/to-file"}, {"../d02", "d01/to-dir"}, {"/etc/passwd", "d01/out"}} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mkfifo(filepath.Join(dir, "d04", "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"d02/f06", "d09", "d09/f07"} {
		if err := unix.Setxattr(filepath.Join(dir, p), "user.reynfs-test", []byte("x "+p), 0); err != nil {
			t.Logf("no user xattrs here (%v): imported without", err)
		}
	}
}

// importTree imports src with workers readers into store, inode numbers
// from 2 (or after base's).
func importTree(t *testing.T, store cas.Store, src string, workers int, base *tree.Tree, pin PathSet, since int64) (*tree.Tree, cas.Hash) {
	t.Helper()
	next := uint64(tree.RootIno + 1)
	if base != nil {
		next = base.MaxIno() + 1
	}
	im := &Importer{Store: store, Base: base, Pin: pin, Since: since, Workers: workers,
		Alloc: func() (uint64, error) { next++; return next - 1, nil }}
	tr, err := im.Import(src)
	if err != nil {
		t.Fatalf("import with %d workers: %v", workers, err)
	}
	root, blobs, err := tr.Root()
	if err != nil {
		t.Fatal(err)
	}
	if err := StoreBlobs(store, blobs); err != nil {
		t.Fatal(err)
	}
	return tr, root
}

// putOnly hides the store's PutBatch: the readers Put each chunk.
type putOnly struct{ cas.Store }

func TestImportParallelSameTree(t *testing.T) {
	src := t.TempDir()
	mixedTree(t, src)
	store := cas.NewMemory()
	importTree(t, store, src, 1, nil, nil, 0) // reads set the atimes once (relatime)
	seqTree, seq := importTree(t, store, src, 1, nil, nil, 0)
	for _, workers := range []int{2, 3, 8} {
		if tr, root := importTree(t, store, src, workers, nil, nil, 0); root != seq {
			t.Errorf("%d workers: root %s, sequential %s:%s", workers, root.Short(), seq.Short(), describeDiff(tr, seqTree))
		}
	}
	if _, root := importTree(t, putOnly{cas.NewMemory()}, src, 4, nil, nil, 0); root != seq {
		t.Errorf("store without batches: root %s, sequential %s", root.Short(), seq.Short())
	}
	// A remount: some files changed, one pinned, recent ctimes read again.
	since := time.Now().UnixNano()
	writeFile(t, filepath.Join(src, "d03", "f08"), "changed while unmounted\n")
	writeFile(t, filepath.Join(src, "d10", "new"), "new while unmounted\n")
	if err := os.Remove(filepath.Join(src, "d06", "f09")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "d08", "f10"), "a write-back that failed\n")
	pin := PathSet{"d08/f10": true, "d06/f09": true}
	importTree(t, store, src, 1, seqTree, pin, since)
	seqRe, reSeq := importTree(t, store, src, 1, seqTree, pin, since)
	for _, workers := range []int{2, 5} {
		if tr, root := importTree(t, store, src, workers, seqTree, pin, since); root != reSeq {
			t.Errorf("re-import, %d workers: root %s, sequential %s:%s", workers, root.Short(), reSeq.Short(), describeDiff(tr, seqRe))
		}
	}
	if n, _ := lookupPath(seqRe, "d06/f09"); n == nil {
		t.Errorf("pinned d06/f09 dropped")
	}
}

func TestImportParallelHardLinks(t *testing.T) {
	src := t.TempDir()
	mixedTree(t, src)
	tr, _ := importTree(t, cas.NewMemory(), src, 4, nil, nil, 0)
	for _, group := range [][]string{{"d07/f04", "d00/link", "d07/again"}, {"d03/f02", "d11/big-link"}} {
		first, err := lookupPath(tr, group[0])
		if err != nil {
			t.Fatal(err)
		}
		if int(first.Nlink) != len(group) {
			t.Errorf("%s: nlink %d, want %d", group[0], first.Nlink, len(group))
		}
		for _, p := range group[1:] {
			if n, err := lookupPath(tr, p); err != nil || n.Ino != first.Ino {
				t.Errorf("%s is not a link of %s (%v)", p, group[0], err)
			}
		}
	}
	n, _ := lookupPath(tr, "d03/f02")
	if n.Size != 3*cas.ChunkSize+17 {
		t.Errorf("linked file size %d", n.Size)
	}
}

// TestImportSwapForSymlinkWhileQueued swaps a file for a symlink to a
// file outside the tree after the walk pinned it and before a reader opens
// it: the reader reads the pinned inode, never the link's target.
func TestImportSwapForSymlinkWhileQueued(t *testing.T) {
	for _, workers := range []int{1, 3} {
		t.Run(fmt.Sprint("workers=", workers), func(t *testing.T) {
			secret, check := outside(t)
			src := t.TempDir()
			writeFile(t, filepath.Join(src, "a"), "a\n")
			writeFile(t, filepath.Join(src, "victim"), "the pinned file\n")
			var once sync.Once
			beforeRead = func(rel string) {
				if rel != "victim" {
					return
				}
				once.Do(func() {
					tmp := filepath.Join(src, "swap")
					if err := os.Symlink(secret, tmp); err != nil {
						t.Error(err)
					}
					if err := os.Rename(tmp, filepath.Join(src, "victim")); err != nil {
						t.Error(err)
					}
				})
			}
			defer func() { beforeRead = nil }()
			store := cas.NewMemory()
			tr, _ := importTree(t, store, src, workers, nil, nil, 0)
			n, err := lookupPath(tr, "victim")
			if err != nil || !n.IsReg() {
				t.Fatalf("victim imported as %+v (%v), want the regular file pinned", n, err)
			}
			buf := make([]byte, 64)
			k, _ := tr.ReadAt(n, buf, 0)
			if string(buf[:k]) != "the pinned file\n" {
				t.Errorf("victim reads %q", buf[:k])
			}
			if ok, _ := store.Has(cas.Sum([]byte("outside\n"))); ok {
				t.Errorf("the symlink's target was read into the store")
			}
			if st, err := os.Lstat(filepath.Join(src, "victim")); err != nil || st.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("the swap did not happen: %v %v", st, err)
			}
			check()
		})
	}
}

// failStore fails PutBatch after ok batches; it records the largest batch.
type failStore struct {
	*cas.Memory
	mu       sync.Mutex
	ok       int
	calls    int
	maxBytes int
}

var errInjected = errors.New("injected store failure")

func (s *failStore) PutBatch(blobs []cas.Blob) error {
	s.mu.Lock()
	s.calls++
	n := 0
	for _, b := range blobs {
		n += len(b.Data)
	}
	s.maxBytes = max(s.maxBytes, n)
	fail := s.ok >= 0 && s.calls > s.ok
	s.mu.Unlock()
	if fail {
		return errInjected
	}
	return s.Memory.PutBatch(blobs)
}

// leakCheck fails the test if the import left goroutines or descriptors
// behind.
func leakCheck(t *testing.T) func() {
	t.Helper()
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	g0, f0 := runtime.NumGoroutine(), fds()
	return func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > g0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if g := runtime.NumGoroutine(); g > g0 {
			t.Errorf("%d goroutines left behind", g-g0)
		}
		if f := fds(); f != f0 {
			t.Errorf("%d descriptors before the import, %d after", f0, f)
		}
	}
}

// bigTree writes files of 256 KiB each, more than the readers' window.
func bigTree(t *testing.T, files int) string {
	t.Helper()
	src := t.TempDir()
	data := make([]byte, 4*cas.ChunkSize)
	for i := range files {
		rand.Read(data)
		writeFile(t, filepath.Join(src, fmt.Sprintf("d%d", i%7), fmt.Sprintf("f%03d", i)), string(data))
	}
	return src
}

func TestImportBatchesWithinWindow(t *testing.T) {
	src := bigTree(t, 200) // 50 MiB
	for i := range 300 {
		writeFile(t, filepath.Join(src, "small", fmt.Sprint(i)), fmt.Sprintf("small %d\n", i))
	}
	const workers = 2
	s := &failStore{Memory: cas.NewMemory(), ok: -1}
	importTree(t, s, src, workers, nil, nil, 0)
	if s.maxBytes > importWindow/workers {
		t.Errorf("a batch of %d bytes, over the window's share %d", s.maxBytes, importWindow/workers)
	}
	// 50 MiB in batches of up to 8 MiB: a handful, not one per file.
	if s.calls < 50<<20/(importWindow/workers) || s.calls > 20 {
		t.Errorf("%d batches for 500 files", s.calls)
	}
}

func TestImportStoreFailureStops(t *testing.T) {
	src := bigTree(t, 120)
	for _, workers := range []int{1, 3} {
		done := leakCheck(t)
		next := uint64(2)
		im := &Importer{Store: &failStore{Memory: cas.NewMemory(), ok: 1}, Workers: workers,
			Alloc: func() (uint64, error) { next++; return next - 1, nil }}
		if _, err := im.Import(src); !errors.Is(err, errInjected) {
			t.Errorf("%d workers: import over a failing store: %v, want the store's error", workers, err)
		}
		done()
	}
}

func TestImportAllocFailureStops(t *testing.T) {
	src := t.TempDir()
	mixedTree(t, src)
	errFull := errors.New("no inode numbers left")
	for _, workers := range []int{1, 4} {
		done := leakCheck(t)
		calls := 0
		im := &Importer{Store: cas.NewMemory(), Workers: workers, Alloc: func() (uint64, error) {
			calls++
			if calls > 100 {
				return 0, errFull
			}
			return uint64(calls + 1), nil
		}}
		if _, err := im.Import(src); !errors.Is(err, errFull) {
			t.Errorf("%d workers: %v, want Alloc's error", workers, err)
		}
		done()
	}
}

// TestImportCancel cancels a first import midway (Ctrl-C on a first
// mount): the import returns the cancellation, leaves nothing running or
// open, and the journal holds no record.
func TestImportCancel(t *testing.T) {
	src := bigTree(t, 60)
	for i := range 400 {
		writeFile(t, filepath.Join(src, "small", fmt.Sprint(i)), "x\n")
	}
	for _, workers := range []int{1, 2, 4} {
		j := openJournal(t, t.TempDir())
		// The journal's own goroutines are not the import's: its log's
		// prefill starts with the first frame written (cas/prefill.go),
		// so write one before counting.
		if _, err := j.Objects().Put([]byte("the log's first frame")); err != nil {
			t.Fatal(err)
		}
		done := leakCheck(t)
		ctx, cancel := context.WithCancel(context.Background())
		next := uint64(2)
		progressed := 0
		im := &Importer{Store: j.Objects(), Workers: workers, Ctx: ctx,
			Alloc: func() (uint64, error) { next++; return next - 1, nil },
			Progress: func(files int, _ int64) {
				progressed = files
				if files == 30 {
					cancel()
				}
			}}
		_, err := im.Import(src)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%d workers: cancelled import returned %v", workers, err)
		}
		if progressed > 30+jobQueue+stepBatch {
			t.Errorf("%d workers: %d files after the cancel at 30", workers, progressed)
		}
		done()
		if h := j.Head(); h != 0 {
			t.Errorf("%d workers: journal head %d after a cancelled import", workers, h)
		}
		cancel()
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestImportReadsFIFOAsNode: a FIFO in the tree is an inode, never opened
// (opening one would block the import).
func TestImportReadsFIFOAsNode(t *testing.T) {
	src := t.TempDir()
	if err := unix.Mkfifo(filepath.Join(src, "p"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, _ := importTree(t, cas.NewMemory(), src, 2, nil, nil, 0)
	if n, err := lookupPath(tr, "p"); err != nil || n.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		t.Errorf("fifo imported as %+v %v", n, err)
	}
}

// TestImportReaderPanic: a panic in a reader is raised again on the
// caller's goroutine (where the CLI turns it into an internal error),
// after the pipeline has stopped; it does not end the process.
func TestImportReaderPanic(t *testing.T) {
	src := t.TempDir()
	mixedTree(t, src)
	beforeRead = func(rel string) {
		if rel == "d05/f07" {
			panic("reader bug")
		}
	}
	defer func() { beforeRead = nil }()
	done := leakCheck(t)
	next := uint64(2)
	im := &Importer{Store: cas.NewMemory(), Workers: 3, Alloc: func() (uint64, error) { next++; return next - 1, nil }}
	func() {
		defer func() {
			g, ok := recover().(*goPanic)
			if !ok || g.value != "reader bug" || len(g.Stack()) == 0 {
				t.Errorf("recovered %v, want the reader's panic with its stack", g)
			}
		}()
		_, err := im.Import(src)
		t.Errorf("import returned %v, want a panic", err)
	}()
	done()
}
