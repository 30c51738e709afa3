package journal

import (
	"errors"
	"fmt"
	"sync"

	"github.com/reynfs/reynfs/cas"
)

// commitLoop is the single committer: it takes the whole queued batch,
// writes it as one frame of the log and its index, and wakes every waiter
// of that batch. A Sync that finds the committer idle appends the queued
// batch itself (syncFront) and leaves its index to the committer, which
// writes it before anything else. After a failure it keeps draining,
// failing each batch, so no Wait hangs.
func (j *Journal) commitLoop() {
	defer close(j.done)
	for {
		j.mu.Lock()
		for j.unindexed == nil && (j.fronting || len(j.cur.items) == 0) && !(j.closing && !j.fronting) {
			j.work.Wait()
		}
		if u := j.unindexed; u != nil {
			j.unindexed = nil
			j.mu.Unlock()
			j.indexed(u.b, u.index())
			continue
		}
		if len(j.cur.items) == 0 {
			j.mu.Unlock()
			return
		}
		b, failed := j.takeLocked()
		j.mu.Unlock()

		err := failed
		if err == nil {
			err = j.prepare(b)
		}
		if err == nil {
			if err = j.commit(b); err != nil {
				err = fmt.Errorf("%w: commit: %w", ErrFailed, err)
				j.log.Error().Err(err).Uint64("seq", b.maxSeq).Msg("journal commit failed; journal is read-only until restart")
			}
		}
		j.done1(b, err, true)
	}
}

// takeLocked takes the queued batch for a commit (the caller holds mu and
// becomes the one appending it: fronting) and returns it with the
// journal's sticky error.
func (j *Journal) takeLocked() (*batch, error) {
	b := j.cur
	j.cur = newBatch()
	j.inflight += b.bytes
	j.fronting = true
	j.progress.Broadcast() // Enqueue may have waited for space
	return b, j.err
}

// prepare backs what b can reach in Badger's mapped files with blocks
// (space.go): a full disk fails the commit, not the process.
func (j *Journal) prepare(b *batch) error {
	if j.space == nil {
		return nil
	}
	if err := j.space.prepare(b); err != nil {
		err = fmt.Errorf("%w: commit: %w", ErrFailed, err)
		j.log.Error().Err(err).Uint64("seq", b.maxSeq).Msg("journal commit refused: no space to back it; journal is read-only until restart")
		return err
	}
	return nil
}

// done1 ends b's commit: with err nil its frame and index are written;
// either way every waiter of b is woken. front: b's taker ends it, and
// with it the fronting (not so for a batch whose index the committer
// wrote after a Sync appended it: another may be appending by then).
func (j *Journal) done1(b *batch, err error, front bool) {
	j.mu.Lock()
	j.inflight -= b.bytes
	if front {
		j.fronting = false
	}
	if err != nil {
		if j.err == nil {
			j.err = err
		}
		b.err = j.err
	} else {
		// max: a later batch that failed before its append may have
		// ended first.
		j.committed = max(j.committed, b.lastPo)
		// Also a batch with nothing to append, or a store without
		// a log (which calls no Appended).
		j.appended = max(j.appended, b.lastPo)
		j.appendedSeq = max(j.appendedSeq, b.maxSeq)
		if b.maxSeq > 0 {
			j.durable.Store(b.maxSeq)
		}
	}
	b.ended = true
	after := b.onDone
	b.onDone = nil
	j.progress.Broadcast()
	j.work.Signal() // the committer may wait for fronting to end
	j.mu.Unlock()
	close(b.done)
	for _, fn := range after {
		fn(b.err)
	}
}

// frame builds the frame of b: blobs first, then records (and the reset
// index) and meta writes in queue order, then "m/seq".
func (j *Journal) frame(b *batch) (f *cas.Frame, records, resets uint64) {
	f = &cas.Frame{Last: b.maxSeq}
	if b.blobs > 0 {
		f.Blobs = make([]cas.Blob, 0, b.blobs)
	}
	for _, it := range b.items {
		f.Blobs = append(f.Blobs, it.blobs...)
		switch {
		case it.key == nil:
			records++
			if f.First == 0 {
				f.First = it.seq
			}
			f.Ops = append(f.Ops, cas.Op{Key: seqKey(prefixRecord, it.seq), Val: it.val})
			if it.reset {
				resets++
				f.Ops = append(f.Ops, cas.Op{Key: seqKey(prefixReset, it.seq), Val: it.val})
			}
		case it.val == nil:
			f.Ops = append(f.Ops, cas.Op{Key: it.key, Del: true})
		default:
			f.Ops = append(f.Ops, cas.Op{Key: it.key, Val: it.val})
		}
	}
	if b.maxSeq > 0 {
		f.Ops = append(f.Ops, cas.Op{Key: keySeq, Val: uint64Bytes(b.maxSeq)})
	}
	return f, records, resets
}

// commit writes one batch as one frame of the log: blobs first (cas skips
// stored ones and repeats), then records (and the reset index) and meta
// writes in queue order, then "m/seq"; then the same writes go to the
// Badger index in one unsynced write batch (cas.Badger.Commit). The frame
// is checksummed as a whole, so after a crash it is all there or cut off:
// a record is never durable without the blobs ahead of it (invariant 1).
func (j *Journal) commit(b *batch) error {
	if err := j.injected("commit"); err != nil {
		return err
	}
	f, records, resets := j.frame(b)
	f.Appended = func() {
		// The frame is in the log: a Sync waiting for it may start its
		// fdatasync while the index is written.
		j.mu.Lock()
		j.appended = b.lastPo
		j.appendedSeq = max(j.appendedSeq, b.maxSeq)
		j.progress.Broadcast()
		j.mu.Unlock()
	}
	if resets > 0 {
		// ResetCount must not count this batch's resets once in its scan
		// and again here.
		j.resetMu.Lock()
		defer j.resetMu.Unlock()
	}
	written, deduped, err := j.objs.Commit(f)
	if err != nil {
		return err
	}
	if resets > 0 && j.resetKnown {
		j.resetCount += int(resets)
	}
	j.counted(records, written, deduped)
	return nil
}

// counted notes a commit of records and blobs in the stats.
func (j *Journal) counted(records uint64, written, deduped int) {
	j.ckpt.note()
	j.stats.commits.Add(1)
	j.stats.records.Add(records)
	j.stats.blobsWritten.Add(uint64(written))
	j.stats.blobsDeduped.Add(uint64(deduped))
	for {
		m := j.stats.maxBatch.Load()
		if records <= m || j.stats.maxBatch.CompareAndSwap(m, records) {
			break
		}
	}
}

// unindexed is a batch whose frame a Sync appended (syncFront), its index
// left to the committer.
type unindexed struct {
	b     *batch
	index func() error
}

// syncFrontLocked reports whether a Sync may append the queued batch
// itself: the committer is idle (nobody is appending a batch), the
// journal works, and the batch holds no reset record (whose count the
// committer keeps under resetMu). The caller holds mu.
func (j *Journal) syncFrontLocked() bool {
	return !j.fronting && !j.closing && j.err == nil && len(j.cur.items) > 0 && j.cur.resets == 0 && j.objs.Logged()
}

// syncFront appends batch b (taken by takeLocked) as the committer would,
// on the Sync's own goroutine: a Sync waiting for a committer to wake,
// and then to be woken by it, waits for two goroutine hand-offs on every
// fsync. The frame's index is left to the committer (the log's writer
// lock goes with it, cas.Unindexed), so that it is written while the
// Sync runs the fdatasync, as when the committer appends. On an error the
// batch fails here.
func (j *Journal) syncFront(b *batch) {
	err := j.prepare(b)
	var u *cas.Unindexed
	var records uint64
	deduped := 0
	if err == nil {
		err = j.injected("commit")
		if err == nil {
			var f *cas.Frame
			f, records, _ = j.frame(b)
			u, deduped, err = j.objs.Append(f)
		}
		if err != nil {
			err = fmt.Errorf("%w: commit: %w", ErrFailed, err)
			j.log.Error().Err(err).Uint64("seq", b.maxSeq).Msg("journal commit failed; journal is read-only until restart")
		}
	}
	if err != nil || u == nil {
		if err == nil {
			j.counted(records, 0, deduped)
		}
		j.done1(b, err, true)
		return
	}
	j.mu.Lock()
	j.appended = b.lastPo
	j.appendedSeq = max(j.appendedSeq, b.maxSeq)
	j.unindexed = &unindexed{b: b, index: func() error {
		written, err := u.Index()
		if err != nil {
			return err
		}
		j.counted(records, written, deduped)
		return nil
	}}
	j.fronting = false
	j.work.Signal()
	j.progress.Broadcast()
	j.mu.Unlock()
}

// indexed ends the commit of a batch a Sync appended, once the committer
// wrote its index (with err nil) or failed to.
func (j *Journal) indexed(b *batch, err error) {
	if err != nil {
		err = fmt.Errorf("%w: commit: %w", ErrFailed, err)
		j.log.Error().Err(err).Uint64("seq", b.maxSeq).Msg("journal commit failed; journal is read-only until restart")
	}
	j.done1(b, err, false)
}

func (j *Journal) injected(op string) error {
	if j.fault == nil {
		return nil
	}
	if err := j.fault(op); err != nil {
		return fmt.Errorf("injected fault: %w", err)
	}
	return nil
}

// syncer shares log syncs: one caller runs it while the others wait,
// and a sync covers every item committed before it started.
type syncer struct {
	mu      sync.Mutex
	cond    *sync.Cond
	running bool
	synced  uint64 // every item at or below this pos is synced
}

// Sync returns once everything enqueued before the call is committed and a
// log sync (fdatasync of the segments written, one device flush) that
// started after that commit's frame was in the log has finished: from
// then on it survives a power cut. The sync starts as soon as the frame is
// written and runs while the committer writes the frame's index, which
// Sync then waits for too, so that what it covers can be read. When the
// committer is idle, Sync appends the queued batch itself (syncFront).
// Concurrent callers share syncs. Badger, the index, is not synced here: the log
// holds everything it would need (checkpoint.go). A failed sync fails the
// journal (ErrFailed): after fsync reports an error the page cache can no
// longer be trusted to hold what it dropped.
func (j *Journal) Sync() error {
	j.closeMu.RLock()
	closed := j.closed
	j.closeMu.RUnlock()
	if closed {
		return fmt.Errorf("sync: %w", ErrClosed)
	}
	j.mu.Lock()
	target := j.pos
	j.appendThroughLocked(target, false)
	err := j.err
	j.mu.Unlock()
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}

	s := &j.syncer
	s.mu.Lock()
	for s.synced < target {
		if s.running {
			s.cond.Wait()
			continue
		}
		s.running = true
		j.mu.Lock()
		covers, failed, seq := j.appended, j.err, j.appendedSeq
		j.mu.Unlock()
		if failed != nil {
			s.running = false
			s.cond.Broadcast()
			s.mu.Unlock()
			return fmt.Errorf("sync: %w", failed)
		}
		s.mu.Unlock()
		err := j.dbSync()
		s.mu.Lock()
		s.running = false
		s.cond.Broadcast()
		if errors.Is(err, ErrClosed) {
			s.mu.Unlock()
			return fmt.Errorf("sync: %w", err)
		}
		if err != nil {
			s.mu.Unlock()
			err = j.fail(fmt.Errorf("%w: sync: %w", ErrFailed, err))
			return fmt.Errorf("sync: %w", err)
		}
		s.synced = max(s.synced, covers)
		if j.marks != nil {
			j.marks.durable(seq) // the store manifest's durable marks
		}
	}
	s.mu.Unlock()

	// The index write of what the sync covered, usually done by now.
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.committed < target && j.err == nil {
		j.progress.Wait()
	}
	if j.err != nil {
		return fmt.Errorf("sync: %w", j.err)
	}
	return nil
}

func (j *Journal) dbSync() error {
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if j.closed {
		return ErrClosed
	}
	if err := j.injected("sync"); err != nil {
		return err
	}
	j.stats.syncs.Add(1)
	return j.objs.SyncLog()
}

// fail makes the journal failed (if it is not already) and returns the
// sticky error.
func (j *Journal) fail(err error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		j.err = err
		j.log.Error().Err(err).Msg("journal failed; read-only until restart")
		j.progress.Broadcast()
	}
	return j.err
}

// WaitLogged returns once the record's frame is in the log: written with
// pwrite into the page cache, so it survives kill -9 of the daemon (Open
// catches the index up from the log, TestKillBetweenFrameAndIndex), as
// after Wait. Its index may still be being written: until Wait returns,
// the store may not find the record's blobs (Get, Has) and the record
// may not be read back. From then on the commit no longer reads the Data
// of a file chunk among the blobs (a blob without a Base, or with
// BaseData or Chunk set; cas caches copies of other objects with a Base
// after their index), so a caller that lent such bytes may reuse them.
//
// When the committer is idle, WaitLogged appends the queued batch on the
// caller's goroutine, as Sync does (syncFront), and leaves its index to
// the committer: a 1 MiB write's reply then waits neither for the
// committer to wake nor for the index, and the index is written while the
// next request arrives. A previous frame's index that the committer has
// not taken yet it writes itself first: its append would wait for that
// index anyway (the log's writer lock), and on a busy machine the
// committer's turn may come a millisecond later. When the journal fails
// first, WaitLogged returns what Wait returns (the batch is over then);
// an index failure after the frame is Wait's alone.
func (p *Pending) WaitLogged() error {
	if p.err != nil {
		return p.err
	}
	j := p.j
	j.mu.Lock()
	// j.appended covers a batch once its frame is in the log; batches
	// are appended in queue order, and p.b.lastPo is fixed once taken.
	j.appendThroughLocked(p.b.lastPo, true)
	logged := j.appended >= p.b.lastPo
	j.mu.Unlock()
	if logged {
		return nil
	}
	// The journal failed, maybe while another goroutine appends this
	// batch: wait for its end, after which nothing reads its blobs.
	return p.Wait()
}

// appendThroughLocked returns, with j.mu held as on entry, once the log
// holds every batch up to queue position target or the journal failed.
// A batch the committer has not taken it appends on the caller's
// goroutine (syncFront) when the committer is idle, and otherwise wakes
// the committer (a batch with a reset record, a closing journal, a
// record EnqueueSyncing queued without waking it); while one is
// appending, its end (done1, syncFront) wakes the committer. With
// indexPrev, a previous frame's index that the committer has not taken
// yet is written here first: the append would wait for it on the log's
// writer lock, and on a busy machine the committer's turn may come a
// millisecond later (WaitLogged).
func (j *Journal) appendThroughLocked(target uint64, indexPrev bool) {
	for j.appended < target && j.err == nil {
		if u := j.unindexed; indexPrev && u != nil && j.syncFrontLocked() {
			j.unindexed = nil
			j.mu.Unlock()
			j.indexed(u.b, u.index())
			j.mu.Lock()
			continue
		}
		if j.syncFrontLocked() {
			b, _ := j.takeLocked()
			j.mu.Unlock()
			j.syncFront(b)
			j.mu.Lock()
			continue
		}
		if !j.fronting {
			j.work.Signal()
		}
		j.progress.Wait()
	}
}
