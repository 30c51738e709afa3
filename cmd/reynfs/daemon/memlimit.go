package daemon

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// MemoryFloor is the daemon's soft memory limit while its live heap is
// small: issue 4 holds the daemon under 300 MiB at 100k files.
const MemoryFloor = 256 << 20

// memHeadroom is how far above the live heap the limit sits once the
// heap outgrows MemoryFloor: the collector then runs when the heap has
// grown by half of what is live (GOGC=50), never all the time, and by
// at most memHeadroomMax, so a million-file tree (about 600 MiB live)
// does not take the daemon past 1 GiB for garbage: with 256 MiB its peak
// just after the first import of 1M files was 1047 MiB, with 128 MiB
// 896 MiB (checkpoints 5.6 and 5.3 ms, idle CPU 0.9 and 1.1 %).
const (
	memHeadroom    = 2 // the limit is live + live/memHeadroom ...
	memHeadroomMax = 128 << 20
)

// LimitMemory keeps the runtime's soft memory limit at the larger of floor
// and one and a half times the live heap (at most 128 MiB above it),
// re-read after every collection.
//
// A fixed limit below the live heap makes the collector run without
// pause: at 300k files the tree alone is 230 MiB, and a daemon under a
// fixed 256 MiB spent a third of a CPU collecting while idle, its
// checkpoints and syncfs calls waiting on mark assists (a checkpoint took
// 10-140 ms instead of 2-10 ms). A limit that follows the live heap keeps
// the small workspace's bound and gives a large one room to work; the
// heap then never holds much more garbage than half of what is live.
//
// It returns a function that stops the tuning (tests); the daemon never
// calls it. GOMEMLIMIT, when set, is the operator's choice: the caller
// leaves it alone.
func LimitMemory(floor int64) (stop func()) {
	m := &memTuner{floor: floor}
	m.set(floor)
	m.arm()
	return func() { m.stopped.Store(true) }
}

type memTuner struct {
	floor   int64
	last    int64 // the limit set last
	stopped atomic.Bool
	sample  [1]metrics.Sample
}

// gcSentinel is garbage as soon as it is made; its finalizer runs after
// the collection that found it so, and arms the next one. It holds a
// pointer, so the tiny allocator (whose objects may never be finalized)
// does not take it.
type gcSentinel struct{ m *memTuner }

func (m *memTuner) arm() {
	runtime.SetFinalizer(&gcSentinel{m: m}, func(s *gcSentinel) {
		if s.m.stopped.Load() {
			return
		}
		s.m.tune()
		s.m.arm()
	})
}

// tune runs on the finalizer goroutine after each collection. Setting the
// limit stops the world briefly, so it changes only when the wanted value
// moved by more than a sixteenth.
func (m *memTuner) tune() {
	m.sample[0].Name = "/gc/heap/live:bytes"
	metrics.Read(m.sample[:])
	if m.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	live := int64(m.sample[0].Value.Uint64())
	want := max(m.floor, live+min(live/memHeadroom, memHeadroomMax))
	if d := want - m.last; d > m.last/16 || -d > m.last/16 {
		m.set(want)
	}
}

func (m *memTuner) set(limit int64) {
	debug.SetMemoryLimit(limit)
	m.last = limit
}

// memReturner gives the heap's free pages back to the system after a big
// one-off operation (a rewind, a checkout, an undo): a full collection,
// then a scavenge of every free page (debug.FreeOSMemory), on a goroutine
// of its own after the operation has answered.
//
// The runtime keeps the pages a collection frees for the heap to grow
// into again, up to about 1.1 times the next collection's goal (twice the
// live heap with the default GOGC); the memory limit's floor is above
// that for a small workspace. At 100k files the live heap is about 100
// MiB, so after five rewinds (27 MiB of garbage each) the daemon held
// 60-80 MiB of free heap pages, resident, until whenever the next
// collection and the background scavenger got to them: its RSS after the
// benchmark's history phase was 190-225 MiB depending on where the last
// collection fell. A rewind is rare and takes 0.1-0.3 s at that size; one
// collection after it (its marking is about a tenth of a CPU second per
// 100 MiB live, beside the requests that follow) makes the RSS after it
// the live heap's, whatever the collector's timing. A collection for
// every checkpoint (the common operation, a few ms) would cost more than
// it returns; those stay with the limit and the scavenger.
//
// It returns only while the collector's goal (the live heap times 1 +
// GOGC/100) is below the memory limit, the small workspace's case: a
// heap above the floor is held to the limit, which the tuner keeps within
// half the live heap (and the scavenger keeps the free pages below it),
// and a full collection of a million-file tree (600 MiB live) after each
// rewind would cost about a CPU second for little.
//
// It waits until no request has come for memReturnQuiet: a burst of
// rewinds (undo, undo, undo from the picker; the benchmark's five, a
// second apart) would otherwise start each one on a heap just collected
// and returned, with every page it touches to fault in again: a rewind at
// 100k files took 57 ms instead of 15-40 with a return between each (its
// reconstruction phase alone; it allocates some 6 MB, most of it whole
// packs read for one inode object each, cas readPacked). Requests
// arriving while one runs are folded into one more run after it.
type memReturner struct {
	mu      sync.Mutex
	running bool      // a return, or the wait for its quiet, is under way
	again   bool      // a request came during the running return
	last    time.Time // the latest request
	log     zerolog.Logger
	quiet   time.Duration            // 0: memReturnQuiet; tests set it below that
	done    func(took time.Duration) // tests: called after each run
}

// memReturnQuiet is how long a return waits for requests to stop.
const memReturnQuiet = 2 * time.Second

// after asks for a return after the operation what.
func (r *memReturner) after(what string) {
	if !goalBelowLimit() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = time.Now()
	if r.running {
		r.again = true
		return
	}
	r.running = true
	go r.run(what)
}

func (r *memReturner) run(what string) {
	quiet := r.quiet
	if quiet == 0 {
		quiet = memReturnQuiet
	}
	for {
		r.mu.Lock()
		wait := quiet - time.Since(r.last)
		r.again = false
		r.mu.Unlock()
		if wait > 0 {
			time.Sleep(wait)
			continue
		}
		t0 := time.Now()
		debug.FreeOSMemory()
		took := time.Since(t0)
		r.log.Debug().Str("after", what).Dur("took", took).Msg("returned free heap pages to the system")
		if r.done != nil {
			r.done(took)
		}
		r.mu.Lock()
		if !r.again {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
	}
}

// goalBelowLimit says whether the collector's next goal, from the live
// heap and GOGC, is below the memory limit: then the runtime keeps free
// pages for the heap to grow to that goal, and not the limit.
func goalBelowLimit() bool {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return true
	}
	live, gogc := s[0].Value.Uint64(), int64(s[1].Value.Uint64())
	if gogc < 0 { // GOGC=off: only the limit collects
		return false
	}
	limit := debug.SetMemoryLimit(-1)
	return limit < 0 || live+live*uint64(gogc)/100 < uint64(limit)
}
