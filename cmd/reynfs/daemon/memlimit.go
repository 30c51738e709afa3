package daemon

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
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
