package rewind

import (
	"container/heap"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// The warmer reads the project directory's metadata ahead of the walker.
// The walker stats one entry at a time, and on a first mount after a boot
// (or after the page cache was dropped) each directory block and each
// run of inodes it meets is a read from the disk that it waits for: 100k
// files in 1000 directories took 4 s to stat in walk order on virtio,
// longer than the whole import is allowed. The warmer lists directories
// and stats their entries on warmWorkers goroutines in about the walker's
// order, at most warmAhead directories ahead of it, so that the walker
// finds the dentries, inodes and directory blocks in the kernel's caches.
//
// It only warms caches: nothing it reads reaches the tree, and the walker
// still pins, stats and opens every entry itself (import.go), so what the
// import records and how it resists a hostile directory do not change.
// It opens only directories, below the top and through no symlink
// (openBeneath), and stats entries without following them.
type warmer struct {
	top     *os.File
	mu      sync.Mutex
	cond    *sync.Cond
	queue   walkHeap // directories to warm, the walker's order first
	started int      // directories taken from the queue
	entered int      // directories the walker entered
	active  int      // directories being warmed
	stop    bool
	wg      sync.WaitGroup
}

const (
	// warmWorkers is how many directories are warmed at once: the reads
	// in flight that the walker alone would make one after the other.
	warmWorkers = 8
	// warmAhead bounds how far the warmer runs ahead of the walker, in
	// directories, so that what it warms is still cached when the walker
	// comes (a million-file tree is not read into the cache whole first).
	warmAhead = 64
)

// warming, if set, is called with each directory the warmer lists (tests).
var warming func(rel string)

// startWarmer starts warming the tree below top. The caller stops it
// before top is closed.
func startWarmer(top *os.File) *warmer {
	w := &warmer{top: top}
	w.cond = sync.NewCond(&w.mu)
	heap.Push(&w.queue, "")
	for range warmWorkers {
		w.wg.Add(1)
		go w.run()
	}
	return w
}

// enter tells the warmer the walker entered one more directory.
func (w *warmer) enter() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.entered++
	w.mu.Unlock()
	w.cond.Broadcast()
}

// close stops the warmer and waits for its goroutines.
func (w *warmer) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.stop = true
	w.mu.Unlock()
	w.cond.Broadcast()
	w.wg.Wait()
}

func (w *warmer) stopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stop
}

func (w *warmer) run() {
	defer w.wg.Done()
	w.mu.Lock()
	for {
		// Wait while others list the directories that will fill the
		// queue, or while the walker is far behind.
		for !w.stop && (len(w.queue) == 0 && w.active > 0 || len(w.queue) > 0 && w.started-w.entered >= warmAhead) {
			w.cond.Wait()
		}
		if w.stop || len(w.queue) == 0 {
			w.mu.Unlock()
			w.cond.Broadcast()
			return
		}
		rel := heap.Pop(&w.queue).(string)
		w.started++
		w.active++
		w.mu.Unlock()
		subs := w.warm(rel)
		w.mu.Lock()
		w.active--
		for _, s := range subs {
			heap.Push(&w.queue, s)
		}
		w.cond.Broadcast()
	}
}

// warm lists the directory rel, stats its entries and returns its
// subdirectories. Errors are the walker's to meet and report: here they
// only end the warming of that directory.
func (w *warmer) warm(rel string) []string {
	if warming != nil {
		warming(rel)
	}
	fd, err := openBeneath(w.top, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil
	}
	d := os.NewFile(uintptr(fd), rel)
	defer d.Close()
	var subs []string
	var st unix.Stat_t
	for {
		ents, err := d.ReadDir(1024)
		for _, e := range ents {
			if unix.Fstatat(fd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				subs = append(subs, joinRel(rel, e.Name()))
			}
		}
		if err != nil || len(ents) == 0 || w.stopped() {
			return subs
		}
	}
}

// walkLess orders relative paths as the walker meets them: depth first,
// each directory's names in byte order (a directory's entries come
// before the names that sort after it: "a/z" before "a-b").
func walkLess(a, b string) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if ca, cb := a[i], b[i]; ca != cb {
			if ca == '/' {
				ca = 0
			}
			if cb == '/' {
				cb = 0
			}
			return ca < cb
		}
	}
	return len(a) < len(b)
}

// walkHeap is a min-heap of relative paths in walk order.
type walkHeap []string

func (h walkHeap) Len() int           { return len(h) }
func (h walkHeap) Less(i, j int) bool { return walkLess(h[i], h[j]) }
func (h walkHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *walkHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *walkHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
