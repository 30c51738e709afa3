package rewind

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// The import pipeline. Three kinds of goroutine share the work:
//
//   - the walker (one) reads directories in name order, pins and stats
//     each entry, and turns it into steps: closures that apply the
//     entry's records to the tree. It alone calls Alloc and keeps the
//     hard-link and used-inode maps, so inode numbers follow the walk
//     whatever the timing. A regular file to read becomes a fileJob,
//     queued for the readers, and one step that waits for it.
//   - the readers (Workers) open each job's file from its pin, read and
//     hash its chunks, and store them in batches (cas.BatchPutter) out of
//     a buffer of their own: the bytes in flight are at most
//     importWindow, whatever the tree holds. A reader takes the queued
//     jobs a batch at a time and reads their small files with one
//     io_uring submission (import_uring.go, readBatch).
//   - the warmer (import_warm.go) lists directories and stats entries a
//     little ahead of the walker, only so that the walker's own reads
//     of a cold tree hit the kernel's caches.
//   - the applier (the caller of ImportAt) runs the steps in the walk's
//     order. It alone touches the tree, so the tree is the one the
//     sequential walk builds (Workers: 1 runs each step as it is made).
//
// The job queue is short (jobQueue): a queued job holds a descriptor,
// and a walker far ahead of the readers would hold thousands. Readers
// never wait for the walker or the applier, and the applier waits only
// for jobs already queued, so nothing waits in a circle. The first error
// anywhere cancels the pipeline's context; every goroutine then stops,
// queued jobs close their descriptors, and ImportAt returns that error
// after all of them have ended. Chunks already stored stay in the store,
// unreferenced, as with a failed Put: nothing names them (no record is
// committed), and gc removes them.

// importWindow bounds the chunk bytes the readers hold at once (read,
// not yet stored), shared among them.
const importWindow = 16 << 20

// jobQueue is how many files may wait for a reader (each holds an
// O_PATH descriptor): enough for every reader to take a whole batch
// (uringBatch).
const jobQueue = 256

// readersPerCPU is how many readers a CPU gets by default. A reader of a
// tree that is not in the page cache (a first mount after a boot) waits
// for the disk most of the time; more readers keep more reads in flight.
// Measured on 2 CPUs, 100k small files on virtio: 2 readers 17.4 s, 8
// readers 9.6 s with the file data evicted; 12.7 s and 12.0 s cached
// (medians of 2 under a load of 20: the hashing costs no more).
const readersPerCPU = 4

// ringReadersPerCPU is readersPerCPU where the readers have io_uring:
// a reader then keeps a batch of reads in flight, not one, and more
// readers only add threads that wait. Cold first mount of 100k small
// files, 4 readers against 8: daemon CPU 6.9 and 6.6 s against 8.9 and
// 6.6 s, batches of 37-55 files against 16-18 (load 7-9, so the wall
// time said nothing).
const ringReadersPerCPU = 2

// stepBatch is how many steps the walker hands the applier at a time.
const stepBatch = 256

// openFileLimit is the soft RLIMIT_NOFILE (0 if unknown).
func openFileLimit() int {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) != nil || rl.Cur > 1<<30 {
		return 0
	}
	return int(rl.Cur)
}

// step applies one part of the walk to the tree, on the applier.
type step func() error

type pipeline struct {
	take   int             // how many jobs a reader takes at once (uringBatch or less)
	procFd int             // /proc/self/fd (O_PATH), or -1: see reopen
	fresh  cas.FreshPutter // set for a Fresh import into a store that has it
	stored *hashSet        // what the readers stored, with fresh
	ctx    context.Context
	cancel context.CancelCauseFunc
	jobs   chan *fileJob // nil: Workers is 1, the walker reads
	steps  chan []step
	batch  []step  // the walker's, not yet handed over
	inline *reader // the walker's reader when Workers is 1
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error    // the first error of a reader's store
	panic  *goPanic // the first panic of the walker or a reader
}

// goPanic is a panic in the walker or a reader, raised again on the
// caller's goroutine (where the CLI's guard reports it) once the pipeline
// has stopped: a panic on a goroutine of its own would end the process.
type goPanic struct {
	value any
	stack []byte
}

func (g *goPanic) String() string { return fmt.Sprintf("%v (in an import goroutine)", g.value) }

// Stack is the stack of the goroutine that panicked.
func (g *goPanic) Stack() []byte { return g.stack }

// recovered records a panic of the calling goroutine (deferred) and stops
// the pipeline.
func (p *pipeline) recovered() {
	r := recover()
	if r == nil {
		return
	}
	g := &goPanic{value: r, stack: debug.Stack()}
	p.mu.Lock()
	if p.panic == nil {
		p.panic = g
	}
	p.mu.Unlock()
	p.cancel(fmt.Errorf("import: internal error: %v", r))
}

// fileJob is a regular file to read: its pin (owned by the job, closed
// by the reader), what the walk knows of it, and, once done is closed,
// what the reader found.
type fileJob struct {
	pfd  int
	st   unix.Stat_t
	rel  string
	ino  uint64
	like *tree.Node // base, if the file's stat matched it (read for Since)
	base *tree.Node // base, if its type matched and its inode is free

	done   chan struct{}
	err    error
	size   uint64
	chunks []journal.Chunk
	xattrs []xattr
}

// fail records err as the pipeline's error (the first one wins) and
// cancels the pipeline.
func (p *pipeline) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
	p.cancel(err)
}

func (p *pipeline) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// run runs walk as the pipeline's walker and applies its steps.
func (im *Importer) run(walk func() error) error {
	parent := im.Ctx
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	p := &pipeline{ctx: ctx, cancel: cancel, procFd: -1}
	if fd, err := unix.Open("/proc/self/fd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		p.procFd = fd
		defer unix.Close(fd) // after the readers: run waits for them
	}
	if fp, ok := im.Store.(cas.FreshPutter); ok && im.Fresh {
		p.fresh, p.stored = fp, &hashSet{m: map[cas.Hash]struct{}{}}
	}
	im.p = p
	defer func() { im.p = nil }()
	workers := im.Workers
	if workers <= 0 {
		workers = readersPerCPU * runtime.GOMAXPROCS(0)
		if u, err := newUring(uringBatch); err == nil {
			u.close()
			workers = ringReadersPerCPU * runtime.GOMAXPROCS(0)
		}
	}
	if workers == 1 {
		p.inline = newReader(im, importWindow)
		err := walk()
		if err == nil {
			err = p.inline.flush()
		}
		return err
	}
	queue := jobQueue
	p.take = uringBatch
	if lim := openFileLimit(); lim > 0 {
		// A queued job holds its pin; a job in a reader's batch, its pin
		// and its open file. Under a small RLIMIT_NOFILE (1024 is common)
		// they stay within a quarter of it; the store needs the rest.
		for queue+2*workers*p.take > lim/4 && p.take > 1 {
			p.take, queue = p.take/2, max(queue/2, 16)
		}
	}
	p.jobs = make(chan *fileJob, queue)
	p.steps = make(chan []step, 16)
	for range workers {
		r := newReader(im, importWindow/workers)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			r.serve(p.jobs)
		}()
	}
	go func() {
		defer close(p.steps)
		defer close(p.jobs) // the walker is the only sender
		defer p.recovered()
		if err := walk(); err != nil {
			p.batch = append(p.batch, func() error { return err })
		}
		if len(p.batch) > 0 {
			select {
			case p.steps <- p.batch:
			case <-ctx.Done():
			}
		}
	}()
	var err error
	for steps := range p.steps {
		for _, s := range steps {
			if err == nil && ctx.Err() != nil {
				err = fmt.Errorf("import: %w", context.Cause(ctx))
			}
			if err == nil {
				err = s()
			}
		}
		if err != nil {
			cancel(err) // the walker and readers stop; drain what was sent
		}
	}
	p.wg.Wait()
	if g := p.panic; g != nil {
		panic(g)
	}
	if serr := p.failure(); serr != nil {
		return serr
	}
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("import: %w", context.Cause(ctx))
	}
	return err
}

// emit hands s to the applier, or runs it now when the walker is the
// applier (Workers: 1).
func (im *Importer) emit(s step) error {
	p := im.p
	if p.inline != nil {
		return s()
	}
	p.batch = append(p.batch, s)
	if len(p.batch) < stepBatch {
		return nil
	}
	select {
	case p.steps <- p.batch:
		p.batch = make([]step, 0, stepBatch)
		return nil
	case <-p.ctx.Done():
		return context.Cause(p.ctx)
	}
}

// readFile queues j for a reader (or reads it now, with Workers: 1) and
// emits the step that applies its content, xattrs and times.
func (im *Importer) readFile(j *fileJob) error {
	p := im.p
	j.done = make(chan struct{})
	if p.inline != nil {
		p.inline.read(j)
	} else {
		select {
		case p.jobs <- j:
		case <-p.ctx.Done():
			unix.Close(j.pfd)
			return context.Cause(p.ctx)
		}
	}
	return im.emit(func() error {
		<-j.done
		if j.err != nil {
			return j.err
		}
		r := &journal.Record{Op: journal.OpData, Ino: j.ino, Size: j.size, Mtime: mtime(&j.st), Chunks: j.chunks}
		im.fileDone(int64(j.size))
		if err := im.apply(r, j.rel); err != nil {
			return err
		}
		if err := im.applyXattrs(j.xattrs, j.rel, j.ino); err != nil {
			return err
		}
		return im.apply(finishRecord(j.ino, &j.st, j.base), j.rel)
	})
}

// reader reads files and stores their chunks. Chunks are read into its
// buffer and stored from there a batch at a time, when the buffer is full
// and at the end.
type reader struct {
	im    *Importer
	p     *pipeline
	bp    cas.BatchPutter // nil: the store has no batches, Put each chunk
	buf   []byte
	used  int // buf[:used] holds the batch's chunks
	blobs []cas.Blob
	news  []cas.Blob // a fresh import's: the blobs no reader stored yet
	ring  *uring     // nil: pread each file (Workers: 1, or no io_uring)
}

// hashSet is the set of objects a fresh import's readers stored.
type hashSet struct {
	mu sync.Mutex
	m  map[cas.Hash]struct{}
}

// addNew appends to dst the blobs of bs not in the set, adds them to it
// and returns dst. A blob is in the set from then on, before it is
// stored: a reader that skips it as stored relies on the other's store,
// which ImportAt waits for (and fails with) before it returns.
func (s *hashSet) addNew(dst, bs []cas.Blob) []cas.Blob {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range bs {
		if _, ok := s.m[b.Hash]; !ok {
			s.m[b.Hash] = struct{}{}
			dst = append(dst, b)
		}
	}
	return dst
}

func newReader(im *Importer, window int) *reader {
	r := &reader{im: im, p: im.p}
	r.bp, _ = im.Store.(cas.BatchPutter)
	size := cas.ChunkSize
	if r.bp != nil {
		size = max(window/cas.ChunkSize, 1) * cas.ChunkSize
	}
	r.buf = make([]byte, size)
	return r
}

// serve reads the queued jobs until the queue closes, then stores what
// it holds. After a failure it only closes the jobs' descriptors.
func (r *reader) serve(jobs <-chan *fileJob) {
	// The ring reads into the batch's buffer: only with a store that
	// takes batches.
	if r.bp != nil {
		r.ring, _ = newUring(uringBatch) // nil where io_uring is refused
		defer func() {
			if r.ring != nil {
				r.ring.close()
			}
		}()
	}
	batch := make([]*fileJob, 0, r.p.take)
	for j := range jobs {
		if r.ring == nil {
			r.safeRead(j)
			continue
		}
		batch = append(batch[:0], j)
	more:
		for len(batch) < r.p.take {
			select {
			case j, ok := <-jobs:
				if !ok {
					break more
				}
				batch = append(batch, j)
			default:
				break more
			}
		}
		r.readBatch(batch)
		clear(batch)
	}
	if r.p.ctx.Err() == nil {
		defer r.p.recovered()
		if err := r.flush(); err != nil {
			r.p.fail(err)
		}
	}
}

// safeRead reads j; a panic stops the pipeline, and the reader goes on
// closing the jobs still queued (the applier may be waiting for one).
func (r *reader) safeRead(j *fileJob) {
	defer r.p.recovered()
	r.read(j)
}

// space returns room for one chunk in the buffer, storing the batch
// first if it is full.
func (r *reader) space() ([]byte, error) {
	if len(r.buf)-r.used < cas.ChunkSize {
		if err := r.flush(); err != nil {
			return nil, err
		}
	}
	return r.buf[r.used : r.used+cas.ChunkSize], nil
}

// put stores the chunk b, which space returned: it joins the batch (and
// stays in the buffer until the batch is stored), or is Put now.
func (r *reader) put(b []byte) (cas.Hash, error) {
	if r.bp == nil {
		return r.im.Store.Put(b)
	}
	h := cas.Sum(b)
	r.blobs = append(r.blobs, cas.Blob{Hash: h, Data: b})
	r.used += len(b)
	return h, nil
}

// flush stores the batch. A failure also fails the pipeline: the files
// whose chunks it held were reported read already.
func (r *reader) flush() error {
	if len(r.blobs) == 0 {
		r.used = 0 // slots of reads that failed, or of empty files
		return nil
	}
	var err error
	if r.p.fresh != nil {
		r.news = r.p.stored.addNew(r.news[:0], r.blobs)
		err = r.p.fresh.PutFresh(r.news)
		clear(r.news)
	} else {
		err = r.bp.PutBatch(r.blobs)
	}
	clear(r.blobs)
	r.blobs, r.used = r.blobs[:0], 0
	if err != nil {
		err = fmt.Errorf("import: store %w", err)
		r.p.fail(err)
	}
	return err
}
