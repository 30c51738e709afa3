package journal

import (
	"errors"
	"fmt"
	"sync"

	"github.com/reynfs/reynfs/cas"
)

// commitLoop is the single committer: it takes the whole queued batch,
// writes it as one Badger WriteBatch and wakes every waiter of that batch.
// After a failure it keeps draining, failing each batch, so no Wait hangs.
func (j *Journal) commitLoop() {
	defer close(j.done)
	for {
		j.mu.Lock()
		for len(j.cur.items) == 0 && !j.closing {
			j.work.Wait()
		}
		if len(j.cur.items) == 0 {
			j.mu.Unlock()
			return
		}
		b := j.cur
		j.cur = newBatch()
		j.inflight = b.bytes
		failed := j.err
		j.progress.Broadcast() // Enqueue may have waited for space
		j.mu.Unlock()

		err := failed
		if err == nil && j.space != nil {
			// Nothing reaches Badger's mapped files that has no blocks
			// behind it (space.go): a full disk fails the commit, not
			// the process.
			if err = j.space.prepare(b); err != nil {
				err = fmt.Errorf("%w: commit: %w", ErrFailed, err)
				j.log.Error().Err(err).Uint64("seq", b.maxSeq).Msg("journal commit refused: no space to back it; journal is read-only until restart")
			}
		}
		if err == nil {
			if err = j.commit(b); err != nil {
				err = fmt.Errorf("%w: commit: %w", ErrFailed, err)
				j.log.Error().Err(err).Uint64("seq", b.maxSeq).Msg("journal commit failed; journal is read-only until restart")
			}
		}

		j.mu.Lock()
		j.inflight = 0
		if err != nil {
			if j.err == nil {
				j.err = err
			}
			b.err = j.err
		} else {
			j.committed = b.lastPo
			// Also a batch with nothing to append, or a store without
			// a log (which calls no Appended).
			j.appended = max(j.appended, b.lastPo)
			j.appendedSeq = max(j.appendedSeq, b.maxSeq)
			if b.maxSeq > 0 {
				j.durable.Store(b.maxSeq)
			}
		}
		j.progress.Broadcast()
		j.mu.Unlock()
		close(b.done)
	}
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
	f := &cas.Frame{Last: b.maxSeq}
	f.Appended = func() {
		// The frame is in the log: a Sync waiting for it may start its
		// fdatasync while the index is written.
		j.mu.Lock()
		j.appended = b.lastPo
		j.appendedSeq = max(j.appendedSeq, b.maxSeq)
		j.progress.Broadcast()
		j.mu.Unlock()
	}
	if b.blobs > 0 {
		f.Blobs = make([]cas.Blob, 0, b.blobs)
	}
	var records, resets uint64
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
	return nil
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
// Sync then waits for too, so that what it covers can be read. Concurrent
// callers share syncs. Badger, the index, is not synced here: the log
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
	for j.appended < target && j.err == nil {
		j.progress.Wait()
	}
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
