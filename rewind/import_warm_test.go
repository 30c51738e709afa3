package rewind

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
)

// walkOrder lists the directories below dir as the import's walker enters
// them: depth first, names in byte order.
func walkOrder(t *testing.T, dir, rel string, out *[]string) {
	t.Helper()
	*out = append(*out, rel)
	ents, err := os.ReadDir(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		walkOrder(t, dir, joinRel(rel, n), out)
	}
}

func TestWalkLessIsWalkOrder(t *testing.T) {
	dir := t.TempDir()
	// "a-b" sorts before "a/..." as bytes but after "a" and its subtree
	// in the walk; "a.b" and "a0" likewise.
	for _, p := range []string{"a/z/y", "a/b", "a-b/c", "a.b", "a0/x", "b", "a/z-", "A", "a/z/y/x"} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	walkOrder(t, dir, "", &want)
	got := slices.Clone(want)
	slices.Reverse(got)
	sort.Slice(got, func(i, j int) bool { return walkLess(got[i], got[j]) })
	if !slices.Equal(got, want) {
		t.Errorf("walkLess order %q, walk order %q", got, want)
	}
}

// TestWarmerListsTreeNotThroughSymlinks: the warmer lists every directory
// of the tree, the top first, and never one a symlink leads to (inside or
// outside the tree).
func TestWarmerListsTreeNotThroughSymlinks(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	var want []string
	for d := range 5 {
		for s := range 30 {
			p := filepath.Join(dir, fmt.Sprintf("d%d", d), fmt.Sprintf("s%02d", s))
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Mkdir(filepath.Join(outside, "secret"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{outside, "d1/out"}, {"../d2", "d3/in"}} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	walkOrder(t, dir, "", &want)
	var mu sync.Mutex
	var got []string
	warming = func(rel string) {
		mu.Lock()
		got = append(got, rel)
		mu.Unlock()
	}
	t.Cleanup(func() { warming = nil })
	top, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	w := startWarmer(top)
	// The walker enters every directory, as the import does; the warmer
	// then ends when the tree is listed.
	for range want {
		w.enter()
	}
	w.wg.Wait()
	w.close()
	if len(got) == 0 || got[0] != "" {
		t.Fatalf("warmer listed %q first, want the top", got)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("warmer listed %q, want %q", got, want)
	}
}

// TestWarmerStaysAhead: the warmer lists at most warmAhead directories
// more than the walker entered, and stops when closed.
func TestWarmerStaysAhead(t *testing.T) {
	dir := t.TempDir()
	for d := range 3 * warmAhead {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("d%03d", d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	listed := 0
	warming = func(string) {
		mu.Lock()
		listed++
		mu.Unlock()
	}
	t.Cleanup(func() { warming = nil })
	top, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	w := startWarmer(top)
	w.enter() // the top
	for {     // until the warmer waits for the walker
		w.mu.Lock()
		waiting := w.active == 0 && w.started-w.entered >= warmAhead
		w.mu.Unlock()
		if waiting {
			break
		}
		runtime.Gosched()
	}
	w.close()
	if listed != warmAhead+1 {
		t.Errorf("warmer listed %d directories with the walker in 1, want %d", listed, warmAhead+1)
	}
}

func TestUringReadsLikePread(t *testing.T) {
	u, err := newUring(uringBatch)
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	defer u.close()
	dir := t.TempDir()
	var fds []int
	var bufs [][]byte
	var want [][]byte
	for i := range uringBatch {
		data := []byte(fmt.Sprintf("%0*d", i*37, i))
		p := filepath.Join(dir, fmt.Sprintf("f%02d", i))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		fds, bufs, want = append(fds, fd), append(bufs, make([]byte, len(data)+1)), append(want, data)
	}
	for round := range 3 { // the ring is used again and again
		res := make([]int32, len(fds))
		if err := u.read(fds, bufs, res); err != nil {
			t.Fatal(err)
		}
		for i := range fds {
			if int(res[i]) != len(want[i]) || string(bufs[i][:res[i]]) != string(want[i]) {
				t.Fatalf("round %d, file %d: read %d bytes %q, want %q", round, i, res[i], bufs[i][:max(res[i], 0)], want[i])
			}
		}
	}
	if err := u.read(append(fds, fds...), append(bufs, bufs...), make([]int32, 2*len(fds))); err == nil {
		t.Errorf("a batch larger than the ring was taken")
	}
	bad := []int{-1}
	res := []int32{0}
	if err := u.read(bad, bufs[:1], res); err != nil || res[0] != -int32(unix.EBADF) {
		t.Errorf("read of fd -1: %v, result %d, want -EBADF", err, res[0])
	}
}

// TestImportUnderLowFileLimit: under a small RLIMIT_NOFILE the pipeline
// holds fewer pins and open files at once (its job queue and batches
// shrink) and imports what the sequential import does.
func TestImportUnderLowFileLimit(t *testing.T) {
	src := t.TempDir()
	for d := range 4 {
		for f := range 150 {
			writeFile(t, filepath.Join(src, fmt.Sprintf("d%d", d), fmt.Sprintf("f%03d", f)), fmt.Sprintf("file %d of %d\n", f, d))
		}
	}
	store := cas.NewMemory()
	importTree(t, store, src, 1, nil, nil, 0) // reads set the atimes once (relatime)
	_, seq := importTree(t, store, src, 1, nil, nil, 0)
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	low := rl
	low.Cur = 160
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	defer func() {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
			t.Fatal(err)
		}
	}()
	if _, root := importTree(t, store, src, 4, nil, nil, 0); root != seq {
		t.Errorf("4 workers under a limit of %d files: root %s, sequential %s", low.Cur, root.Short(), seq.Short())
	}
}
