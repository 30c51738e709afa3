package cas

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

// The segment compactor (restic's prune, for the segment log).
//
// A sweep deletes an object's index entry; its bytes stay in their segment
// until the segment goes. Compact rewrites every sealed segment whose live
// bytes (what index entries still point at) are under half its size: it
// copies the live objects forward into the active segment, switches
// their index entries to the copies, makes the index durable, and unlinks
// the old segment. Only segments the durable index covers whole are
// touched (before the index's log position, which db.Sync makes durable
// first), so every record and index write of their frames is in Badger
// and catch-up never replays them.
//
// Crash safety, step by step (TestCompactCrash kills each):
//   - copies appended, not synced: the index still points at the old
//     segment; the copies are garbage (or, replayed by catch-up, valid
//     duplicates the index then points at — both copies are whole);
//   - copies synced, index switched, not synced: whichever entry Badger
//     kept points at a whole copy, since the old segment is still there;
//   - index synced: the old segment is unreferenced; unlinking it is the
//     last step, and a crash before it leaves a segment the next
//     compaction removes (its live bytes are zero).
//
// Every object stays in the index exactly once (one key per hash). A
// concurrent sweep cannot delete an entry while it is switched (both hold
// the guard's lock); an object the sweep deleted between the copy and the
// switch keeps no entry (the copy is garbage for the next compaction).
// Writers only append meanwhile; the copy-forward holds the log's lock
// for one frame of at most compactFrameBytes.

// compactFrameBytes bounds one copy-forward frame.
const compactFrameBytes = 4 << 20

// minRollBytes: the active segment is sealed and compacted when it is
// mostly garbage and at least this big.
const minRollBytes = 8 << 20

// retireDelay is how long an unlinked segment's open file stays readable
// for a reader that looked its location up just before the switch; a Get
// that reads later than that looks the object up again (Badger.Get).
const retireDelay = 200 * time.Millisecond

// CompactResult says what Compact did.
type CompactResult struct {
	Segments   int   `json:"segments"`    // segments rewritten and removed
	Moved      int   `json:"moved"`       // live objects copied forward
	MovedBytes int64 `json:"moved_bytes"` // their stored bytes
	FreedBytes int64 `json:"freed_bytes"` // bytes of the segments removed
}

// Compact rewrites the sealed segments that are mostly garbage (see
// above). step, when set, is called after each step (crash tests); pause
// between frames. A store without a log has nothing to compact.
func (b *Badger) Compact(step func(string), pause func()) (CompactResult, error) {
	var res CompactResult
	l := b.log
	if l == nil || l.readOnly {
		return res, nil
	}
	at := func(s string) {
		if step != nil {
			step(s)
		}
	}
	segs, err := listSegments(l.dir)
	if err != nil {
		return res, fmt.Errorf("compact: %w", err)
	}
	live, err := b.liveBySegment()
	if err != nil {
		return res, fmt.Errorf("compact: %w", err)
	}
	l.mu.Lock()
	active, end := l.active, l.end
	l.mu.Unlock()
	var cands []uint64
	var sizes []int64
	for _, n := range segs {
		if n > active {
			break
		}
		size := end
		if n < active {
			st, err := os.Stat(l.path(n))
			if err != nil {
				return res, fmt.Errorf("compact: %w", err)
			}
			size = st.Size()
		}
		var liveBytes int64
		for _, e := range live[n] {
			liveBytes += e.loc.share()
		}
		if liveBytes*2 >= size-segHeaderSize || (n == active && size < minRollBytes) {
			continue
		}
		cands, sizes = append(cands, n), append(sizes, size)
	}
	if len(cands) == 0 {
		return res, nil
	}
	if cands[len(cands)-1] == active {
		// Mostly garbage and big enough: seal it, so that it can go too.
		if err := l.roll(); err != nil {
			return res, fmt.Errorf("compact: %w", err)
		}
		at("rolled")
		// Commits went on into it until the roll: list it again.
		if live, err = b.liveBySegment(); err != nil {
			return res, fmt.Errorf("compact: %w", err)
		}
	}
	var retired []uint64
	var last time.Time
	defer func() {
		if len(retired) > 0 {
			time.Sleep(time.Until(last.Add(retireDelay)))
			l.rmu.Lock()
			for _, n := range retired {
				if f := l.files[n]; f != nil {
					_ = f.Close()
					delete(l.files, n)
				}
			}
			l.rmu.Unlock()
		}
	}()
	for i, n := range cands {
		moved, err := b.moveForward(live[n], pause, at)
		res.Moved += moved
		for _, e := range live[n][:moved] {
			res.MovedBytes += int64(e.loc.Stored)
		}
		if err != nil {
			return res, fmt.Errorf("compact %s: %w", l.path(n), err)
		}
		// The copies and the index that points at them, durable, in that
		// order (as the journal's checkpoint does); then the segment may
		// go once the durable index covers the log past it, so that
		// catch-up never reads it again.
		if err := b.syncIndex(); err != nil {
			return res, err
		}
		pos, err := b.logPos()
		if err != nil {
			return res, fmt.Errorf("compact: %w", err)
		}
		if pos.Seg <= n {
			if err := b.appendMoved(nil, nil); err != nil {
				return res, fmt.Errorf("compact: %w", err)
			}
			if err := b.syncIndex(); err != nil {
				return res, err
			}
		}
		at("index synced")
		if err := b.unlinkSegment(n); err != nil {
			return res, fmt.Errorf("compact: %w", err)
		}
		retired, last = append(retired, n), time.Now()
		at("unlinked")
		res.Segments++
		res.FreedBytes += sizes[i]
	}
	return res, nil
}

// syncIndex makes the log and then the index durable.
func (b *Badger) syncIndex() error {
	if err := b.log.sync(false); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	if err := b.db.Sync(); err != nil {
		return fmt.Errorf("compact: sync index: %w", err)
	}
	return nil
}

// logPos reads the log position the index covers.
func (b *Badger) logPos() (Pos, error) {
	var p Pos
	err := b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(KeyLogPos)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err == nil {
			p, err = decodePos(v)
		}
		return err
	})
	return p, err
}

// liveBySegment lists the index entries of each segment.
func (b *Badger) liveBySegment() (map[uint64][]blobEntry, error) {
	out := map[uint64][]blobEntry{}
	err := b.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{LogPrefix}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) != keyLen {
				continue
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			loc, err := decodeLoc(v)
			if err != nil {
				return err
			}
			var h Hash
			copy(h[:], k[1:])
			out[loc.Seg] = append(out[loc.Seg], blobEntry{h: h, loc: loc})
		}
		return nil
	})
	return out, err
}

// moveForward copies the entries' stored bytes (checked against their
// hash) into new frames of the active segment, syncs them, and points
// the index at the copies. It returns how many it moved.
func (b *Badger) moveForward(ents []blobEntry, pause func(), at func(string)) (int, error) {
	moved := 0
	for len(ents) > 0 {
		var batch []stored
		var old []blobEntry
		size := 0
		for len(ents) > 0 && (size == 0 || size+int(ents[0].loc.Stored) <= compactFrameBytes) {
			e := ents[0]
			ents = ents[1:]
			if e.loc.Comp == compPack {
				// Out of its pack, stored alone (pack.go).
				s, err := b.unpackOne(e)
				if err != nil {
					return moved, err
				}
				batch, old, size = append(batch, s), append(old, e), size+len(s.data)
				continue
			}
			data, err := b.log.readAt(e.loc.Seg, e.loc.Off, int(e.loc.Stored))
			if err != nil {
				return moved, err
			}
			if err := b.checkStored(e.h, e.loc, data); err != nil {
				return moved, err // never copy damage forward; the segment stays
			}
			batch = append(batch, stored{h: e.h, raw: int(e.loc.Raw), comp: e.loc.Comp, data: data,
				base: e.loc.Base, depth: e.loc.Depth})
			old = append(old, e)
			size += len(data)
		}
		if err := b.appendMoved(batch, old); err != nil {
			return moved, err
		}
		at("copied")
		moved += len(old)
		if pause != nil && len(ents) > 0 {
			pause()
		}
	}
	return moved, nil
}

// checkStored verifies that data, stored at loc, is the object h.
func (b *Badger) checkStored(h Hash, loc Loc, data []byte) error {
	if loc.Comp == compDelta {
		// A delta moves as it is: its base is live (the sweep keeps the
		// bases of what it keeps), wherever it is stored.
		return b.checkDelta(h, loc, data)
	}
	raw := data
	if loc.Comp == compZstd {
		_, dec, _ := codecs()
		out, err := dec.DecodeAll(data, make([]byte, 0, loc.Raw))
		if err != nil {
			return fmt.Errorf("%s: %w", h, ErrCorrupt)
		}
		raw = out
	}
	if Sum(raw) != h {
		return fmt.Errorf("%s: %w", h, ErrCorrupt)
	}
	return nil
}

// appendMoved appends the copies as one frame and, as a commit does under
// the log's lock, writes their index entries and the log position past
// the frame (not synced: Compact syncs the log, then the index). Only
// entries still at their old location are switched, under the guard's
// lock, so no sweep batch deletes one meanwhile. A frame of no copies
// carries a marker op, to move the log position past a rolled segment.
func (b *Badger) appendMoved(batch []stored, old []blobEntry) error {
	var ops []Op
	if len(batch) == 0 {
		ops = []Op{{Key: keyCompacted, Val: []byte{1}}}
	}
	frame, offs := encodeFrame(0, 0, batch, ops)
	l := b.log
	l.mu.Lock()
	defer l.mu.Unlock()
	pos, err := l.append(frame)
	if err != nil {
		return err
	}
	b.guard.mu.Lock()
	defer b.guard.mu.Unlock()
	defer b.forgetMoved(old) // after the switch (readcache.go)
	return b.db.Update(func(txn *badger.Txn) error {
		for i, e := range old {
			k := logKey(e.h)
			item, err := txn.Get(k)
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue // swept meanwhile: the copy is garbage
			}
			if err != nil {
				return err
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			// Compared decoded: an entry the format-5 code wrote is
			// fixed-width, encode writes compact ones.
			if now, err := decodeLoc(v); err != nil || now != e.loc {
				continue
			}
			n := e.loc
			if n.Comp == compPack { // moved out of its pack, alone
				n = Loc{Stored: uint32(len(batch[i].data)), Raw: uint32(batch[i].raw), Comp: batch[i].comp}
			}
			n.Seg, n.Off = pos.Seg, pos.Off+offs[i]
			if err := txn.Set(k, n.encode()); err != nil {
				return err
			}
		}
		for _, o := range ops {
			if err := txn.Set(o.Key, o.Val); err != nil {
				return err
			}
		}
		return txn.Set(KeyLogPos, Pos{pos.Seg, pos.Off + int64(frame.len())}.encode())
	})
}

// keyCompacted is the marker op of a copy-forward frame without copies.
var keyCompacted = []byte("m/compacted")

// roll starts a new active segment (the old one is sealed).
func (l *segLog) roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.startSegment()
}

// unlinkSegment removes segment n's name and makes that durable. Its
// open file stays in the log's table (a reader that looked up an old
// location just before the switch still reads it) until Compact retires
// it; the blocks come back when it is closed.
func (b *Badger) unlinkSegment(n uint64) error {
	l := b.log
	if err := unix.Unlinkat(int(l.dirf.Fd()), segName(n), 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "unlink", Path: l.path(n), Err: err}
	}
	if err := l.dirf.Sync(); err != nil {
		return fmt.Errorf("sync log directory: %w", err)
	}
	return nil
}
