package tree

import (
	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// ReadAt reads file content. Reads share the lock with each other; chunk
// objects come from the store (whose cache holds hot, verified chunks).
func (l *Live) ReadAt(ino uint64, p []byte, off uint64) (int, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n, err := l.node(ino)
	if err != nil {
		return 0, err
	}
	if n.IsDir() {
		return 0, ErrIsDir
	}
	return l.t.ReadAt(n, p, off)
}

// WriteAt writes p at off into the file's write buffer; the buffer is
// journaled once FileFlushBytes were written into it or its chunk buffers
// hold FileBufferBytes, on fsync, on close, and by the periodic FlushAll.
// With appending set, off is ignored and p goes to the end of the file.
// e is the epoch of the handle written through (see Epoch). p is not kept
// past the call.
//
// A write that will flush and brings at least LendBytes of whole chunks
// (a sequential writer's 1 MiB) lends p's bytes to that flush instead of
// copying them into chunk buffers (prepare): the journal's frame is
// written from p itself, and WriteAt returns only once that frame is in
// the log (journal.Pending.WaitLogged, which appends it on this goroutine
// when the committer is idle) and the staging has given the bytes back
// (readers meanwhile get copies), since the FUSE server reuses p for its
// next request. It saves a copy of every byte into fresh memory, and the
// frame's pwritev reads bytes still in the cache; the price is that the
// write's reply waits for that pwritev. The frame's index is written
// while the next request arrives; a read of the chunks before it waits
// for it (staging.giveBack).
func (l *Live) WriteAt(c Caller, ino uint64, e Epoch, p []byte, off uint64, appending bool) (int, error) {
	pre := l.prepare(ino, e, p, off, appending)
	l.mu.Lock()
	k, err := l.writeAt(c, ino, e, p, off, appending, pre)
	lent := l.lent
	l.lent = nil
	l.mu.Unlock()
	for _, lc := range lent {
		werr := lc.p.WaitLogged()
		l.stage.giveBack(lc.blobs, lc.p)
		if werr != nil && err == nil {
			k, err = 0, werr
		}
	}
	return k, err
}

// LendBytes is the least a write's whole chunks must hold for WriteAt to
// lend them to its flush rather than copy them: below it the copies are
// cheaper than the wait for the commit.
const LendBytes = FileFlushBytes / 2

// writeAt is WriteAt's part under the write lock.
func (l *Live) writeAt(c Caller, ino uint64, e Epoch, p []byte, off uint64, appending bool, pre *Prepared) (int, error) {
	if l.failed != nil {
		return 0, l.failed
	}
	if err := l.refuseCancelled(c); err != nil {
		return 0, err
	}
	n, err := l.handleNode(ino, e)
	if err != nil {
		return 0, err
	}
	if n.IsDir() {
		return 0, ErrIsDir
	}
	if appending {
		off = n.Size
	}
	if err := l.admit(uint64(len(p)), journal.AdmitWrite); err != nil {
		return 0, err
	}
	// Lent bytes the write used (Prepared.At) must be flushed before it
	// returns, and must not stay pending if it fails.
	lent := pre != nil && pre.Lent && pre.At == off && len(pre.Bufs) > 0
	err = l.t.WriteAtFrom(n, p, off, l.now(), pre)
	if pre != nil {
		l.recycleUnused(pre)
	}
	if err != nil {
		if lent {
			l.t.ownLent(n, pre.Bufs)
		}
		return 0, err
	}
	l.markPending(c, n)
	if l.written == nil {
		l.written = map[uint64]int{}
	}
	l.written[n.Ino] += len(p)
	if lent || l.written[n.Ino] >= FileFlushBytes || n.counted >= FileBufferBytes {
		l.lending = lent
		err := l.flush(c, n, journal.DataWrite)
		l.lending = false
		if err != nil {
			if lent {
				l.t.ownLent(n, pre.Bufs)
			}
			return 0, err
		}
	}
	if l.pending >= TotalFlushBytes {
		if err := l.flushAll(c); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// prepare does what a write can before WriteAt takes the write lock, so
// that it does not stall every other request meanwhile: it reads the
// stored chunks the write will read-modify-write (Badger, a disk read on a
// cold chunk, the hash check; GetOnce: the version about to be replaced
// is not kept in the store's cache), and copies (or, for a write that
// lends them, slices) and hashes the whole chunks p covers (a sequential
// writer's 1 MiB is 16 of them, which WriteAt would otherwise copy and
// the flush it triggers hash under the lock). Both are
// hints: WriteAt uses a chunk only if its slot still names the same hash,
// and the copies and hashes only if the write lands at the offset they
// were made for; it reads under the lock whatever is missing (also after
// a read error here, which it then reports) and Flush hashes what has no
// hash.
func (l *Live) prepare(ino uint64, e Epoch, p []byte, off uint64, appending bool) *Prepared {
	l.mu.RLock()
	n, err := l.handleNode(ino, e)
	if err != nil {
		l.mu.RUnlock()
		return nil
	}
	if appending {
		off = n.Size
	}
	old := l.t.ToRead(n, off, uint64(len(p)))
	// Lend p's whole chunks (see WriteAt) when this write will flush
	// them: it brings FileFlushBytes or more to the file's count.
	lend := l.written[n.Ino]+len(p) >= FileFlushBytes && wholeBytes(len(p), off) >= LendBytes
	l.mu.RUnlock()
	var pooled map[uint64]bool
	for idx, b := range old {
		data, fromPool, err := l.stage.GetOnceInto(b.Hash)
		if err != nil {
			delete(old, idx)
			continue
		}
		old[idx] = cas.Blob{Hash: b.Hash, Data: data}
		if fromPool {
			if pooled == nil {
				pooled = map[uint64]bool{}
			}
			pooled[idx] = true
		}
	}
	bufs, sums := wholeChunks(p, off, lend)
	return &Prepared{Old: old, At: off, Bufs: bufs, Sums: sums, Lent: lend && len(bufs) > 0, pooled: pooled}
}

// recycleUnused gives back to the staging's pool each pooled chunk read
// of pre (staging.GetOnceInto) that the write did not take as its slot's
// base (Tree.pendingChunkFrom, which removes those it takes from
// pre.pooled: the slot changed, or had a pending buffer by then). One it
// took goes back when its note goes (Tree.setBase).
func (l *Live) recycleUnused(pre *Prepared) {
	for idx := range pre.pooled {
		l.stage.recycle(pre.Old[idx].Data)
	}
	pre.pooled = nil
}

// wholeBytes is how many bytes of whole chunk slots a write of n bytes at
// off covers.
func wholeBytes(n int, off uint64) int {
	skip := int((cas.ChunkSize - off%cas.ChunkSize) % cas.ChunkSize)
	if n < skip {
		return 0
	}
	return (n - skip) / cas.ChunkSize * cas.ChunkSize
}

// Fallocate modes, as in fallocate(2).
const (
	FallocKeepSize  = 0x01
	FallocPunchHole = 0x02
	FallocZeroRange = 0x10
)

// Fallocate preallocates (grows the size unless KEEP_SIZE), punches holes
// or zeroes a range, through a handle opened in epoch e.
func (l *Live) Fallocate(c Caller, ino uint64, e Epoch, mode uint32, off, length uint64) error {
	l.warm(ino, off, length, true) // the partial chunks at the ends (live_lazy.go)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.refuseCancelled(c); err != nil {
		return err
	}
	n, err := l.handleNode(ino, e)
	if err != nil {
		return err
	}
	if !n.IsReg() {
		return ErrInvalid
	}
	if err := l.admit(2*cas.ChunkSize, fallocClass(mode)); err != nil {
		return err
	}
	now := l.now()
	switch {
	case mode&^(FallocKeepSize|FallocPunchHole|FallocZeroRange) != 0:
		return ErrNotSupported
	case mode&FallocPunchHole != 0 && mode&FallocKeepSize == 0:
		return ErrInvalid
	case mode&(FallocPunchHole|FallocZeroRange) != 0:
		err = l.t.ZeroRange(n, off, length, now)
	}
	if err != nil {
		return err
	}
	if mode&FallocKeepSize == 0 && off+length > n.Size {
		if err := l.t.Truncate(n, off+length, now); err != nil {
			return err
		}
	}
	l.markPending(c, n)
	return l.flush(c, n, journal.DataFallocate)
}

// CopyRange copies length bytes from one file to another (copy_file_range)
// through the write buffer; dstEpoch is the epoch of the handle written
// through (see Epoch).
func (l *Live) CopyRange(c Caller, src uint64, srcOff uint64, dst uint64, dstEpoch Epoch, dstOff, length uint64) (int, error) {
	l.warm(src, srcOff, length, false) // read under the lock below (live_lazy.go)
	l.warm(dst, dstOff, length, true)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.refuseCancelled(c); err != nil {
		return 0, err
	}
	in, err := l.node(src)
	if err != nil {
		return 0, err
	}
	out, err := l.handleNode(dst, dstEpoch)
	if err != nil {
		return 0, err
	}
	if !in.IsReg() || !out.IsReg() {
		return 0, ErrInvalid
	}
	if srcOff >= in.Size {
		return 0, nil
	}
	length = min(length, in.Size-srcOff, 1<<30)
	if err := l.admit(length, journal.AdmitWrite); err != nil {
		return 0, err
	}
	buf := make([]byte, min(length, FileFlushBytes))
	done := uint64(0)
	for done < length {
		k, err := l.t.ReadAt(in, buf[:min(uint64(len(buf)), length-done)], srcOff+done)
		if err != nil {
			return int(done), err
		}
		if err := l.t.WriteAt(out, buf[:k], dstOff+done, l.now()); err != nil {
			return int(done), err
		}
		done += uint64(k)
		l.markPending(c, out)
		if out.PendingBytes() >= FileFlushBytes {
			if err := l.flush(c, out, journal.DataCopy); err != nil {
				return int(done), err
			}
		}
	}
	return int(done), l.flush(c, out, journal.DataCopy)
}

// Flush journals ino's buffered writes (close(2) calls it).
func (l *Live) Flush(c Caller, ino uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.node(ino)
	if err != nil {
		return err
	}
	return l.flush(c, n, journal.DataWrite)
}

// Fsync journals ino's buffered writes and returns once everything
// journaled so far is synced to disk: after it, the data survives kill -9
// and power loss.
func (l *Live) Fsync(c Caller, ino uint64) error {
	if err := l.flushSyncing(c, ino); err != nil && err != ErrStale {
		return err
	}
	return l.j.Sync()
}

// flushSyncing is Flush for Fsync, whose Sync follows: the record goes to
// the journal with EnqueueSyncing.
func (l *Live) flushSyncing(c Caller, ino uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.node(ino)
	if err != nil {
		return err
	}
	l.syncing = true
	defer func() { l.syncing = false }()
	return l.flush(c, n, journal.DataWrite)
}

// Sync journals every buffered write and syncs the journal (syncfs, and
// the unmount's first step). The buffers were admitted when they were
// written, so their flush may use the space reserve: an unmount completes
// on a full disk.
func (l *Live) Sync(c Caller) error {
	l.mu.Lock()
	err := l.FlushAllLocked(c)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	return l.j.Sync()
}

// FlushAll journals every buffered write without syncing; the daemon calls
// it periodically so buffered data does not wait for a close forever.
func (l *Live) FlushAll(c Caller) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushAll(c)
}

func (l *Live) flushAll(c Caller) error {
	for _, n := range l.dirty {
		if err := l.flush(c, n, journal.DataWrite); err != nil {
			return err
		}
	}
	return nil
}

// markPending notes that n holds pending data, written by c, and recounts
// its buffers.
func (l *Live) markPending(c Caller, n *Node) {
	b := n.PendingBytes()
	l.pending += b - n.counted
	n.counted = b
	l.dirty[n.Ino] = n
	l.writers[n.Ino] = c
}

// dropPending drops n's pending buffers and notes; the pooled buffers of
// its bases go back once after is done (the commit that journaled them,
// which reads them as BaseData), or at once when after is nil.
func (l *Live) dropPending(n *Node, after *journal.Pending) {
	l.pending -= n.counted
	n.counted = 0
	delete(l.dirty, n.Ino)
	delete(l.writers, n.Ino)
	delete(l.written, n.Ino)
	n.ClearPending()
	l.stage.recycleAfter(l.t.dropSums(n), after)
}

// flush turns n's pending buffers into one OpData record, attributed to
// the last caller that wrote them. An unlinked open
// file is not journaled: its chunks are stored and applied in memory.
func (l *Live) flush(c Caller, n *Node, kind uint8) error {
	if !n.Dirty() {
		return nil
	}
	r, blobs := l.t.Flush(n, kind)
	if kind == journal.DataWrite && r.Size == 0 && len(r.Chunks) == 0 && len(r.Holes) == 0 {
		r.Kind = journal.DataTruncate // a pending truncation to 0 (SetAttr), nothing written since
	}
	r.Time = l.now()
	if l.t.nodes[n.Ino] != n {
		for _, b := range blobs {
			if _, err := l.t.store.Put(b.Data); err != nil {
				return err
			}
		}
		n.setContent(r)
		l.dropPending(n, nil)
		return nil
	}
	// The record names who wrote the data, not who flushed it (the
	// periodic flush, a close by another process, a rewind); c is still
	// the one refused if its run was cancelled.
	who, ok := l.writers[n.Ino]
	if !ok {
		who = c
	}
	p, err := l.commitP(c, who, r, blobs)
	if err != nil {
		return err
	}
	l.dropPending(n, p)
	return nil
}
