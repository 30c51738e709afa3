package cas

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Pre-written segment space (see doc.go, "Segment log"): a background
// goroutine keeps the active segment written with real zeros, and that
// size synced, up to prefillAhead bytes past the log's end, so that a
// commit's frame overwrites blocks that exist and its fdatasync flushes
// data only. An append grows i_size, and fallocate leaves unwritten
// extents whose conversion is metadata too: either way every fdatasync
// would also commit the file system's journal, two or more device flushes
// instead of one (RocksDB's recycled logs, PostgreSQL's zero-filled WAL
// segments and SQLite's pre-sized WAL avoid the same cost). A round of
// steps runs only when a caller synced the log since the last round
// (fsyncs, generation cuts, SetMeta; not the index checkpoint's sync every
// second and every 64 MiB, nor a compaction's): a bulk writer that does
// not sync appends, since zeros written ahead of it would be written again
// by its frames (fio's 1 GiB sequential write with the checkpoint's rounds:
// some 256 MiB of zeros, each step fdatasynced, a seventh of the daemon's
// CPU). Its first fsync appends (one metadata commit) and starts the
// rounds for the syncs after it. A round writes whole steps
// only, once the space ahead is down to prefillAhead-prefillStep (or the
// last, shorter one up to the segment size): a round after every fsync
// that topped up the few KiB its frame took would grow the file at every
// fsync, the metadata commit this is here to avoid.
//
// Invariants: bytes of the active segment in [end, size) are zeros; zeros
// are written only at or past the file's size, under fill.mu; a frame is
// written either below filled (synced zeros: no lock needed beyond the
// writer's) or under fill.mu. A crash anywhere leaves frames followed by
// zeros, which the scan takes for the log's clean end (recover.go).
var (
	// prefillAhead is how far past the log's end the prefill keeps the
	// active segment written (0: no prefill; tests change it).
	prefillAhead int64 = 16 << 20
	// prefillStep is what one prefill step writes and syncs: each step
	// is one metadata commit of the file system (the size, the blocks),
	// so few big steps beat many small ones (fio 4k write + fsync, 3
	// interleaved runs: 8 MiB steps 13-38% more IOPS than 2 MiB steps).
	prefillStep int64 = 8 << 20
)

// prefillPause is how long the prefill rests after a step failed or was
// refused for lack of space: meanwhile commits append as before.
const prefillPause = time.Second

// prefill is the segment log's pre-written space.
type prefill struct {
	// mu is held while the active segment's size changes: a prefill
	// step's zero write, an append past filled, a roll, a cut, a close.
	mu     sync.Mutex
	filled atomic.Int64 // the active segment's size whose zeros are synced
	gen    uint64       // bumped by every roll and cut, under mu
	closed bool         // under mu: no more zeros

	started  bool          // under the log's mu: the goroutine runs
	stopping bool          // under the log's mu: start nothing more
	kick     chan struct{} // made with the log, buffered: one wake-up pending
	stop     chan struct{}
	done     chan struct{}
	room     func(n int64) bool // may the prefill take n more bytes of disk
	pause    time.Time          // the goroutine's: no step before then
	wakes    atomic.Int64       // kicks the goroutine took (tests)
}

// SetPrefillRoom sets how the prefill asks for disk space: room(n) reports
// whether n more bytes may be taken without eating into the reserve that
// writers need (the journal's space.go). Set before the first commit.
func (b *Badger) SetPrefillRoom(room func(n int64) bool) {
	if b.log != nil {
		b.log.fill.room = room
	}
}

// Prefilled is how many bytes of synced pre-written space lie past the
// log's end: statfs counts them as taken, the journal's free-space checks
// as free for the log (journal/space.go).
func (b *Badger) Prefilled() int64 {
	if b.log == nil {
		return 0
	}
	return max(b.log.fill.filled.Load()-b.log.endA.Load(), 0)
}

// LogEnd returns where the next frame would start: the log's logical end,
// which is no longer the active segment's size.
func (b *Badger) LogEnd() Pos {
	l := b.log
	if l == nil {
		return Pos{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return Pos{l.active, l.end}
}

// wantFill kicks the prefill goroutine (starting it on first use, so that
// it starts after the store's fault hook and room are set) when the
// active segment has room for a step more than it holds. The caller
// holds l.mu.
func (l *segLog) wantFill() {
	if prefillAhead <= 0 || l.readOnly || l.fill.stopping {
		return
	}
	if l.fill.filled.Load()-l.end > prefillAhead-prefillStep || l.fill.filled.Load() >= segmentSize {
		return
	}
	if !l.fill.started {
		l.fill.started = true
		l.fill.stop = make(chan struct{})
		l.fill.done = make(chan struct{})
		go l.fillLoop(l.fill.kick, l.fill.stop, l.fill.done)
	}
	l.kickFill()
}

// fillShort reports whether the active segment's pre-written space is a
// whole step short of prefillAhead past the log's end (or short of the
// segment's end): only then has a prefill round work to do. filled is at
// most the file's size, so what is missing by it is at least what is
// missing by the size: false is exact, true is checked again by fillStep.
func (l *segLog) fillShort() bool {
	f, target := l.fill.filled.Load(), min(l.endA.Load()+prefillAhead, segmentSize)
	return f < target && (target-f >= prefillStep || target >= segmentSize)
}

// kickFill wakes the prefill goroutine, if it runs, to look again.
func (l *segLog) kickFill() {
	select {
	case l.fill.kick <- struct{}{}:
	default:
	}
}

func (l *segLog) fillLoop(kick, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	var synced uint64 // l.syncs when the last round started
	for {
		select {
		case <-stop:
			return
		case <-kick:
		}
		l.fill.wakes.Add(1)
		// A round only when a caller synced the log since the last
		// one: a bulk writer that does not sync would pay for zeros it
		// then overwrites in the page cache, and for a step's fdatasync
		// every 8 MiB (the checkpoint's syncs do not count: sync).
		if n := l.syncs.Load(); n == synced {
			continue
		} else {
			synced = n
		}
		for time.Now().After(l.fill.pause) {
			more, err := l.fillStep()
			if err != nil {
				l.fill.pause = time.Now().Add(prefillPause)
			}
			if !more {
				break
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}
}

// fillStep writes one step of zeros at the active segment's end of file
// and syncs it. It reports whether more is wanted.
func (l *segLog) fillStep() (bool, error) {
	p := &l.fill
	if !l.fillShort() {
		return false, nil
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false, nil
	}
	n, gen := l.activeA.Load(), p.gen
	f, err := l.file(n)
	if err != nil {
		p.mu.Unlock()
		return false, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		p.mu.Unlock()
		return false, err
	}
	size := st.Size
	target := min(l.endA.Load()+prefillAhead, segmentSize)
	if size >= target {
		p.mu.Unlock()
		return false, nil
	}
	step := min(prefillStep, target-size)
	if step < prefillStep && target < segmentSize {
		// Less than a step short: wait for a whole one. Topping up by
		// the few KiB each frame takes would grow the file at every
		// sync (every sync kicks a round): a metadata commit of the
		// file system and a second device flush per fsync, the cost
		// the prefill is there to avoid.
		p.mu.Unlock()
		return false, nil
	}
	if p.room != nil && !p.room(step) {
		p.mu.Unlock()
		return false, errors.New("prefill: no room")
	}
	err = pwritev(f, zeros(step), size, step)
	if err != nil {
		_ = f.Truncate(size) // give back what a short write took
		p.mu.Unlock()
		return false, fmt.Errorf("prefill %s: %w", f.Name(), err)
	}
	p.mu.Unlock()
	if l.fault != nil {
		// Crash tests: zeros written, neither they nor the size synced.
		if err := l.fault("prefill"); err != nil {
			return false, err
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		// The zeros stay (readers take them for the end); the writer
		// appends until the next step succeeds, and its own sync
		// reports an error that matters.
		return false, fmt.Errorf("prefill %s: sync: %w", f.Name(), err)
	}
	p.mu.Lock()
	if p.gen == gen && !p.closed && size+step > p.filled.Load() {
		p.filled.Store(size + step)
	}
	p.mu.Unlock()
	return size+step < target, nil
}

// zeroBlock is the zeros a prefill step writes, repeated in one pwritev
// as many times as the step needs: in the binary's zero-filled data, never
// written, it costs no resident memory. An 8 MiB zero buffer made on the
// heap for the whole step was 8 MiB of a 100k-file daemon's live heap
// (and so 16 MiB of its collector's goal), resident when the runtime gave
// it pages it had to clear.
var zeroBlock [256 << 10]byte

// zeros returns n zero bytes as parts of zeroBlock (never written to).
func zeros(n int64) [][]byte {
	parts := make([][]byte, 0, (n+int64(len(zeroBlock))-1)/int64(len(zeroBlock)))
	for ; n > 0; n -= int64(len(zeroBlock)) {
		parts = append(parts, zeroBlock[:min(n, int64(len(zeroBlock)))])
	}
	return parts
}

// resetFill says the active segment is size bytes now (a new segment, a
// cut, a reopen): what lies past the log's end in it is zeros. The caller
// holds fill.mu.
func (l *segLog) resetFill(size int64) {
	l.fill.gen++
	l.fill.filled.Store(size)
}

// dropFill truncates the active segment's unused prefill at the log's
// end (a roll seals it, a close leaves no zero tail behind). Not synced:
// a crash that loses the truncation leaves zeros the scan takes for the
// segment's end. The caller holds l.mu and fill.mu.
func (l *segLog) dropFill() error {
	if l.active == 0 || l.readOnly {
		return nil
	}
	f, err := l.file(l.active)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return &os.PathError{Op: "stat", Path: f.Name(), Err: err}
	}
	if st.Size > l.end {
		if err := f.Truncate(l.end); err != nil {
			return fmt.Errorf("drop prefill of %s: %w", f.Name(), err)
		}
	}
	l.resetFill(l.end)
	return nil
}

// stopFill ends the prefill goroutine and drops the unused prefill.
func (l *segLog) stopFill() error {
	l.mu.Lock()
	l.fill.stopping = true
	stop, done := l.fill.stop, l.fill.done
	l.fill.stop = nil // a second close finds it stopped
	l.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fill.mu.Lock()
	defer l.fill.mu.Unlock()
	if l.fill.closed {
		return nil
	}
	l.fill.closed = true
	return l.dropFill()
}
