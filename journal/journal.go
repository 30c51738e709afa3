package journal

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
)

// Journal is the write-ahead journal of one workspace store. All methods
// are safe for concurrent use.
type Journal struct {
	db    *badger.DB
	objs  *cas.Badger
	log   zerolog.Logger
	fault func(op string) error

	mu        sync.Mutex
	work      *sync.Cond // the committer waits here for a batch
	progress  *sync.Cond // Enqueue (space) and Sync (commit) wait here
	cur       *batch     // the batch Enqueue adds to
	next      uint64     // next seq to assign
	pos       uint64     // items ever enqueued; an item's pos orders Sync
	committed uint64     // pos of the last committed item
	inflight  int        // bytes of the batches being committed
	// fronting: a batch is taken and its frame not yet in the log (the
	// committer's or a Sync's, syncFront); unindexed: a batch a Sync
	// appended, its index for the committer to write next (commit.go).
	fronting  bool
	unindexed *unindexed
	err       error // sticky, wraps ErrFailed
	closing   bool
	done      chan struct{} // closed when the committer has exited

	// appended is the pos of the last item whose frame is in the log,
	// its index maybe not yet written; appendedSeq its batch's max seq.
	// Sync starts its fdatasync from there (commit.go).
	appended    uint64
	appendedSeq uint64

	head    atomic.Uint64
	durable atomic.Uint64

	syncer syncer
	stats  counters
	space  *space // nil for a store in memory

	// closeMu guards the DB against Close: readers hold it shared.
	closeMu sync.RWMutex
	closed  bool

	// The index checkpoint (checkpoint.go): Badger is synced in the
	// background, not on the fsync path.
	ckpt checkpointer

	// tail: read-only opens, the index writes of the log's frames past
	// what Badger holds (nil value: deleted), read over Badger.
	tail map[string][]byte

	// Durable marks and read-only opens (manifest.go, readonly.go).
	readOnly bool
	shadow   *shadow
	damage   []string
	marks    *marks // nil when read-only

	attached sync.Map // Attached: caches of packages above the journal

	// ResetCount: the committed reset records, counted once and then
	// kept by the committer (resetMu is held across a commit that
	// writes one, so a count and a commit never interleave).
	resetMu    sync.Mutex
	resetKnown bool
	resetCount int
}

// Stats are running counters, for benchmarks and `reynfs status`.
type Stats struct {
	Records      uint64 // records committed
	Commits      uint64 // frames appended to the log (with their index batches)
	Syncs        uint64 // log syncs (fdatasync rounds)
	Checkpoints  uint64 // index checkpoints (db.Sync calls)
	BlobsWritten uint64 // blobs written by commits
	BlobsDeduped uint64 // blobs skipped: already stored or twice in a batch
	MaxBatch     uint64 // most records in one commit
}

type counters struct {
	records, commits, syncs, checkpoints, blobsWritten, blobsDeduped, maxBatch atomic.Uint64
}

// batch is what one commit writes. Every Pending in it shares its done
// channel and error.
type batch struct {
	items  []item
	blobs  int
	bytes  int
	resets int // reset records among items
	maxSeq uint64
	lastPo uint64
	done   chan struct{}
	err    error
	// ended and onDone are under the journal's mu: done1 sets ended and
	// takes onDone (Pending.OnDone).
	ended  bool
	onDone []func(error)
}

// item is one queued record or meta write.
type item struct {
	seq   uint64 // 0 for a meta write
	reset bool   // also index under 'r'
	key   []byte // meta key, nil for a record
	val   []byte // encoded record or meta value (nil deletes the meta key)
	blobs []cas.Blob
}

func newBatch() *batch { return &batch{done: make(chan struct{})} }

// Pending is an enqueued record on its way to Badger.
type Pending struct {
	seq uint64
	b   *batch
	err error // set when the record was refused at Enqueue
	// quiet is the journal of a record EnqueueSyncing queued without
	// waking the committer: Wait wakes it.
	quiet *Journal
	j     *Journal // the journal it was queued in (WaitLogged)
}

// Seq is the seq Enqueue assigned (0 if the record was refused).
func (p *Pending) Seq() uint64 { return p.seq }

// Wait returns once the record and its blobs are committed to the log: they
// survive kill -9 of the process, not a power cut (see Sync). The error
// wraps ErrFailed if the commit failed, ErrInvalid or ErrClosed if the
// record was refused.
// Refused returns the error that kept the record out of the journal
// (invalid, closed, failed), without waiting; nil if it was queued.
func (p *Pending) Refused() error { return p.err }

func (p *Pending) Wait() error {
	if p.err != nil {
		return p.err
	}
	if j := p.quiet; j != nil {
		j.mu.Lock()
		j.work.Signal()
		j.mu.Unlock()
	}
	<-p.b.done
	return p.b.err
}

// OnDone calls fn with what Wait would return, once the record's commit
// has ended: on the goroutine that ends it (the committer, or a Sync that
// appended it), or at once on the caller's if it has ended or was
// refused. It does not wake the committer as Wait does (a record
// EnqueueSyncing queued is appended by its caller's Sync or WaitLogged).
// fn must be short and must not block: take no lock beyond a leaf one,
// and never wait for the journal. It spares a goroutine per commit that
// would only wait to release what the commit read (fs/tree's staging).
func (p *Pending) OnDone(fn func(error)) {
	if p.err != nil || p.b == nil {
		fn(p.err)
		return
	}
	j := p.j
	j.mu.Lock()
	if !p.b.ended {
		p.b.onDone = append(p.b.onDone, fn)
		j.mu.Unlock()
		return
	}
	j.mu.Unlock()
	fn(p.b.err)
}

// start starts the committer over db and objs (the object store over the
// same database, with the segment log unless the store is read-only
// format 1).
func start(db *badger.DB, objs *cas.Badger, next uint64, opts Options) *Journal {
	j := &Journal{
		db:    db,
		objs:  objs,
		log:   opts.Logger,
		fault: opts.Fault,
		cur:   newBatch(),
		next:  next,
		done:  make(chan struct{}),
	}
	objs.SetFault(opts.Fault)
	j.work = sync.NewCond(&j.mu)
	j.progress = sync.NewCond(&j.mu)
	j.syncer.cond = sync.NewCond(&j.syncer.mu)
	if o := db.Opts(); !o.InMemory {
		j.space = newSpace(o.Dir, int(o.ValueThreshold))
		if objs.Logged() && !opts.ReadOnly {
			j.space.prefilled = objs.Prefilled // space.go counts the log's prefill
			objs.SetPrefillRoom(j.space.prefillRoom)
		}
	}
	j.head.Store(next - 1)
	j.durable.Store(next - 1)
	go j.commitLoop()
	if objs.Logged() && !opts.ReadOnly {
		j.ckpt.start(j)
	}
	return j
}

// Enqueue assigns r the next seq (setting r.Seq), queues it with the blobs
// it references and returns without waiting for I/O, unless more than
// 32 MiB is already queued, when it waits for the committer to take the
// queue (backpressure). Callers that need Enqueue order to be seq order
// serialize their calls. r is encoded at once and may be reused; the blobs'
// Data must not change until Wait returns, or, for file chunks (a blob
// without a Base, or with BaseData or Chunk set), until WaitLogged
// returns. A refused record (ErrInvalid,
// ErrClosed, ErrFailed) gets no seq and its Pending returns the error.
func (j *Journal) Enqueue(r *Record, blobs []cas.Blob) *Pending {
	return j.enqueue(r, blobs, true)
}

// EnqueueSyncing is Enqueue for a caller that calls Sync next (a FUSE
// fsync's flush), or WaitLogged (a write that lent its bytes, which
// appends the batch itself the same way): it does not wake the committer, since that Sync appends
// the batch itself when the committer is idle (syncFront) and wakes it
// when not. Woken by Enqueue, the committer would only race the Sync for
// the batch (and lose it nearly always): a goroutine wake-up and a
// contended lock on every fsync for nothing. Pending.Wait and Close wake
// the committer as before, so a record queued this way is never stranded.
func (j *Journal) EnqueueSyncing(r *Record, blobs []cas.Blob) *Pending {
	p := j.enqueue(r, blobs, false)
	if p.err == nil {
		p.quiet = j
	}
	return p
}

func (j *Journal) enqueue(r *Record, blobs []cas.Blob, wake bool) *Pending {
	return j.enqueueAt(r, blobs, wake, 0)
}

// enqueueAt is enqueue; at, when not 0, is the seq r gets (EnqueueAt).
func (j *Journal) enqueueAt(r *Record, blobs []cas.Blob, wake bool, at uint64) *Pending {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.admitLocked(); err != nil {
		return &Pending{err: fmt.Errorf("append: %w", err)}
	}
	seq := j.next
	if at != 0 {
		if at < j.next {
			return &Pending{err: fmt.Errorf("append at seq %d: %w: seqs up to %d are assigned already", at, ErrInvalid, j.next-1)}
		}
		seq = at
	}
	r.Seq = seq
	if err := r.Validate(); err != nil {
		r.Seq = 0
		return &Pending{err: fmt.Errorf("append: %w", err)}
	}
	val := Encode(r)
	if len(val) > MaxRecordSize {
		r.Seq = 0
		return &Pending{err: fmt.Errorf("append: %w: %s record is %d bytes, more than %d", ErrInvalid, r.Op, len(val), MaxRecordSize)}
	}
	j.next = r.Seq + 1
	j.head.Store(r.Seq)
	if r.Op == OpGeneration && j.marks != nil {
		j.marks.noteGeneration(r.Seq)
	}
	b := j.addLocked(item{seq: r.Seq, reset: r.Op == OpReset, val: val, blobs: blobs}, wake)
	return &Pending{seq: r.Seq, b: b, j: j}
}

// admitLocked waits while the queued batch is full and reports whether the
// journal still takes writes.
func (j *Journal) admitLocked() error {
	for j.err == nil && !j.closing && j.cur.bytes > maxBatchBytes {
		j.progress.Wait()
	}
	switch {
	case j.err != nil:
		return j.err
	case j.closing:
		return ErrClosed
	case j.readOnly:
		return ErrReadOnly
	}
	return nil
}

// addLocked queues it; wake: and wakes the committer.
func (j *Journal) addLocked(it item, wake bool) *batch {
	b := j.cur
	j.pos++
	b.lastPo = j.pos
	b.items = append(b.items, it)
	b.bytes += len(it.key) + len(it.val)
	b.blobs += len(it.blobs)
	if it.reset {
		b.resets++
	}
	for _, bl := range it.blobs {
		b.bytes += len(bl.Data)
	}
	b.maxSeq = max(b.maxSeq, it.seq)
	if wake {
		j.work.Signal()
	}
	return b
}

// Head is the last seq assigned (enqueued, maybe not yet committed).
func (j *Journal) Head() uint64 { return j.head.Load() }

// Durable is the last seq committed: it and every seq before it that was
// assigned survive kill -9.
func (j *Journal) Durable() uint64 { return j.durable.Load() }

// Objects returns the object store over the segment log and the same
// database (its index). Blobs passed to Enqueue are written through it,
// in the commit's frame; its Put and PutBatch append frames of their own
// through the same writer.
func (j *Journal) Objects() *cas.Badger { return j.objs }

// DB returns the Badger database for packages that keep their own keys
// under the prefixes doc.go reserves for them.
func (j *Journal) DB() *badger.DB { return j.db }

// Attached returns the value kept with j under key, made by mk on the
// first call (key is a package's own unexported type, as for context
// values). Packages above the journal keep in-memory copies of their own
// Badger indexes here, such as rewind's generation index, so that a reply
// that needs the newest generation does not scan the index each time. The
// value lives as long as this open journal: the store lock allows one
// writable open per store, so no other writer can make such a copy stale
// behind its package's back.
func (j *Journal) Attached(key any, mk func() any) any {
	if v, ok := j.attached.Load(key); ok {
		return v
	}
	v, _ := j.attached.LoadOrStore(key, mk())
	return v
}

// Stats returns the running counters.
func (j *Journal) Stats() Stats {
	return Stats{
		Records:      j.stats.records.Load(),
		Commits:      j.stats.commits.Load(),
		Syncs:        j.stats.syncs.Load(),
		Checkpoints:  j.stats.checkpoints.Load(),
		BlobsWritten: j.stats.blobsWritten.Load(),
		BlobsDeduped: j.stats.blobsDeduped.Load(),
		MaxBatch:     j.stats.maxBatch.Load(),
	}
}

// Close commits everything enqueued, syncs and closes the database. Later
// calls return ErrClosed. Close must not be called from an Iter callback.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closing {
		j.mu.Unlock()
		return fmt.Errorf("close: %w", ErrClosed)
	}
	j.closing = true
	j.work.Signal()
	j.progress.Broadcast()
	j.mu.Unlock()
	<-j.done

	j.mu.Lock()
	failed := j.err
	j.mu.Unlock()
	var syncErr error
	if failed == nil {
		syncErr = j.Sync()
	}
	ckptErr := j.ckpt.stop() // the final index checkpoint
	j.closeMu.Lock()
	defer j.closeMu.Unlock()
	j.closed = true
	if j.space != nil {
		j.space.close()
		releaseDiscard(j.space.dir) // under Badger's lock: see discard.go
	}
	closeErr := j.db.Close()
	if err := j.objs.CloseLog(); err != nil && closeErr == nil {
		closeErr = err
	}
	if j.shadow != nil {
		j.shadow.close()
	}
	if j.marks != nil {
		j.marks.close() // the final durable marks
	}
	switch {
	case failed != nil:
		return fmt.Errorf("close: %w", failed)
	case syncErr != nil:
		return fmt.Errorf("close: %w", syncErr)
	case ckptErr != nil:
		return fmt.Errorf("close: %w", ckptErr)
	case closeErr != nil:
		return fmt.Errorf("close: %w", closeErr)
	}
	return nil
}
