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
			if b.maxSeq > 0 {
				j.durable.Store(b.maxSeq)
			}
		}
		j.progress.Broadcast()
		j.mu.Unlock()
		close(b.done)
	}
}

// commit writes one batch: blobs first, then records (and the reset index)
// and meta writes in queue order, then "m/seq". Badger splits a batch that
// is too big for one transaction into several, committed in order, so a
// record never becomes durable before the blobs ahead of it (invariant 1).
func (j *Journal) commit(b *batch) error {
	if err := j.injected("commit"); err != nil {
		return err
	}
	wb := j.db.NewWriteBatch()
	defer wb.Cancel()

	var seen map[cas.Hash]struct{}
	if b.blobs > 1 {
		seen = make(map[cas.Hash]struct{}, b.blobs)
	}
	var written, deduped, records uint64
	for _, it := range b.items {
		for _, bl := range it.blobs {
			if _, dup := seen[bl.Hash]; dup {
				deduped++
				continue
			}
			if seen != nil {
				seen[bl.Hash] = struct{}{}
			}
			w, err := j.objs.AddToBatch(wb, bl)
			if err != nil {
				return fmt.Errorf("blob %s: %w", bl.Hash.Short(), err)
			}
			if w {
				written++
			} else {
				deduped++
			}
		}
	}
	for _, it := range b.items {
		var err error
		switch {
		case it.key == nil:
			records++
			err = wb.Set(seqKey(prefixRecord, it.seq), it.val)
			if err == nil && it.reset {
				err = wb.Set(seqKey(prefixReset, it.seq), it.val)
			}
		case it.val == nil:
			err = wb.Delete(it.key)
		default:
			err = wb.Set(it.key, it.val)
		}
		if err != nil {
			return err
		}
	}
	if b.maxSeq > 0 {
		if err := wb.Set(keySeq, uint64Bytes(b.maxSeq)); err != nil {
			return err
		}
	}
	var resets int
	for _, it := range b.items {
		if it.reset {
			resets++
		}
	}
	if resets > 0 {
		// ResetCount must not count this batch's resets once in its scan
		// and again here.
		j.resetMu.Lock()
		defer j.resetMu.Unlock()
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	if resets > 0 && j.resetKnown {
		j.resetCount += resets
	}
	j.stats.commits.Add(1)
	j.stats.records.Add(records)
	j.stats.blobsWritten.Add(written)
	j.stats.blobsDeduped.Add(deduped)
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

// syncer shares db.Sync calls: one caller runs it while the others wait,
// and a sync covers every item committed before it started.
type syncer struct {
	mu      sync.Mutex
	cond    *sync.Cond
	running bool
	synced  uint64 // every item at or below this pos is synced
}

// Sync returns once everything enqueued before the call is committed and a
// db.Sync that started after that commit has finished: from then on it
// survives a power cut. Concurrent callers share db.Sync calls. A failed
// sync fails the journal (ErrFailed): after fsync reports an error the page
// cache can no longer be trusted to hold what it dropped.
func (j *Journal) Sync() error {
	j.closeMu.RLock()
	closed := j.closed
	j.closeMu.RUnlock()
	if closed {
		return fmt.Errorf("sync: %w", ErrClosed)
	}
	j.mu.Lock()
	target := j.pos
	for j.committed < target && j.err == nil {
		j.progress.Wait()
	}
	err := j.err
	j.mu.Unlock()
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}

	s := &j.syncer
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.synced < target {
		if s.running {
			s.cond.Wait()
			continue
		}
		s.running = true
		j.mu.Lock()
		covers, failed, seq := j.committed, j.err, j.durable.Load()
		j.mu.Unlock()
		if failed != nil {
			s.running = false
			s.cond.Broadcast()
			return fmt.Errorf("sync: %w", failed)
		}
		s.mu.Unlock()
		err := j.dbSync()
		s.mu.Lock()
		s.running = false
		s.cond.Broadcast()
		if errors.Is(err, ErrClosed) {
			return fmt.Errorf("sync: %w", err)
		}
		if err != nil {
			err = j.fail(fmt.Errorf("%w: sync: %w", ErrFailed, err))
			return fmt.Errorf("sync: %w", err)
		}
		s.synced = max(s.synced, covers)
		if j.marks != nil {
			j.marks.durable(seq) // the store manifest's durable marks
		}
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
	return j.db.Sync()
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
