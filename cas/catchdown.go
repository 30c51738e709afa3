package cas

import (
	"bytes"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Catch-down: the index ahead of the log after a power cut.
//
// Badger's memtable WAL is a mapped file written without a sync, so the
// kernel may write its pages back before the log's unsynced frames reach
// the disk. After a power cut Badger then replays index writes ("m/logpos",
// 'l' entries, the frame's key writes) of frames the log's scan cuts as a
// torn tail. The synced-through marks prove those frames were never
// synced, so nothing acknowledged refers to them: the index is brought
// back to the log instead of the store being refused.
//
// What a frame writes to the index is its blobs' 'l' entries, its ops
// (keys under the prefixes LogOptions.FrameKeys names, and keyCompacted)
// and "m/logpos", in one write batch, under the writer's lock: in Badger's
// version order the index writes of the frames come in log order, and
// "m/logpos" is the last write of each. Badger keeps a key's older
// versions until a compaction merges a newer one over them, which cannot
// happen while the newer one is only in the memtable (where every write
// since the last flush is). So, with X the first bad frame and vX the
// version of the newest "m/logpos" write at or before X (the last frame
// whose index write completed before X):
//
//   - an 'l' entry pointing at X or past it (or into a segment the cut
//     drops) goes back to its newest older version that is a deletion or
//     points before X (a compaction's switch), else it is deleted; one
//     into an intact frame after X written at or before vX is damage: the
//     index knew that frame before it claimed a position at or before X,
//     which no write-back explains (a position that went back, as the
//     journal's tests set it: a sync covered the frame);
//   - a frame key written after vX goes back to its newest version at or
//     before vX, or is deleted if it has none (a record or reset past the
//     log's last seq, "m/seq", a meta key a cut frame set);
//   - "m/logpos" is written again, last, by the catch-up that follows.
//
// Keys written straight into Badger outside frames (rewind's generation
// and restore indexes, branch names, the collector's deletions, the
// journal's truncation and floor) are left alone: each is written after a
// sync of the log that covered what it names (journal/doc.go, "Damage").
//
// Where X lies: the scan from the index's position finds a bad frame the
// index's 'l' entries know frames after; or the index's position itself
// lies past a bad frame (the usual case: "m/logpos" is in the same batch
// as the frame's entries). For the latter the log is walked from a
// position the marks prove synced to the index's position (aheadAt): the
// newest "m/logpos" version at or before the largest mark of a frame
// found at one of its versions, else its oldest version. A bad frame on
// that walk is judged like one the scan finds (tailAt): a later frame's
// mark past it is damage, refused; else it is a torn tail and the index
// is caught down to it.

// posVersion is one version of "m/logpos" Badger keeps.
type posVersion struct {
	pos Pos
	ver uint64
}

// logPosVersions returns the versions of "m/logpos" that are claims on
// the log as it is, newest first: going back, each at or before the
// newer ones. One past a newer, smaller position is stale: a claim on
// frames a cut removed (this catch-down's or a crash's), whose place
// later frames may have taken, so not a frame boundary any more.
//
// It stops after the first claim before the mark of the newest intact
// frame found at a claimed position (aheadAt starts there; the older
// claims are not needed, and a store keeps one per frame since Badger's
// last compaction of the key).
func (b *Badger) logPosVersions() ([]posVersion, error) {
	var out []posVersion
	var mark Pos
	err := b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{AllVersions: true, Prefix: KeyLogPos})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			if !bytes.Equal(item.Key(), KeyLogPos) || item.IsDeletedOrExpired() {
				continue
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			p, err := decodePos(v)
			if err != nil {
				return err
			}
			if len(out) > 0 && posLess(out[len(out)-1].pos, p) {
				continue // stale (see above)
			}
			out = append(out, posVersion{p, item.Version()})
			if mark != (Pos{}) && posLess(p, mark) {
				return nil
			}
			if mark == (Pos{}) && b.log != nil {
				if fh, ok := b.log.headerAt(p); ok && fh.marked {
					mark = fh.mark
				}
			}
		}
		return nil
	})
	return out, err
}

// aheadAt walks the log up to the index's position (vers[0]) from a
// position known synced and returns the first bad frame on the way (ok
// false: none), or damage (wrapping ErrDamaged) if a sync covered it.
func (b *Badger) aheadAt(vers []posVersion) (x Pos, ok bool, err error) {
	if len(vers) < 2 {
		return Pos{}, false, nil // the scan from the position covers the rest
	}
	l := b.log
	segs, err := listSegments(l.dir)
	if err != nil || len(segs) == 0 {
		return Pos{}, false, err
	}
	have := make(map[uint64]bool, len(segs))
	for _, n := range segs {
		have[n] = true
	}
	last := segs[len(segs)-1]
	top := vers[0].pos
	// The largest mark of a frame found at a claimed position: the
	// newest such frame's (marks grow with the log).
	var mark Pos
	for _, v := range vers {
		if !have[v.pos.Seg] || posLess(top, v.pos) {
			continue
		}
		if fh, ok := l.headerAt(v.pos); ok && fh.marked {
			mark = fh.mark
			break
		}
	}
	// Start one claimed frame before that mark, so that the last synced
	// frame is checked too, else at the oldest claim.
	start, found := Pos{}, false
	if mark != (Pos{}) {
		for _, v := range vers {
			if posLess(v.pos, mark) && (!found || posLess(start, v.pos)) {
				start, found = v.pos, true
			}
		}
	}
	if !found {
		for _, v := range vers {
			if !posLess(top, v.pos) && (!found || posLess(v.pos, start)) {
				start, found = v.pos, true
			}
		}
	}
	for n := start.Seg; n <= top.Seg; n++ {
		if !have[n] {
			return Pos{}, false, nil // before a compaction's gap: the scan reports what is missing
		}
	}
	for n := start.Seg; n <= top.Seg; n++ {
		off := int64(segHeaderSize)
		if n == start.Seg {
			off = max(start.Off, segHeaderSize)
		}
		hdr, data, err := l.readSegment(n, off)
		if err != nil {
			return Pos{}, false, err
		}
		if checkSegHeader(hdr, n, l.id) != nil {
			return Pos{}, false, nil // the scan reports it
		}
		stop := data.end()
		if n == top.Seg {
			stop = top.Off
		}
		for off < stop {
			_, fr, why := frameAt(data, off)
			if why == "" {
				off = fr
				continue
			}
			zeros := off < data.end() && allZero(data.slice(off, data.end()))
			sealed := n != top.Seg && zeros
			v, _, err := l.tailAt(data, off, n, last, sealed)
			if err != nil {
				return Pos{}, false, err
			}
			if v == tailClean {
				break // a sealed segment's zero tail: its end
			}
			if v != tailTorn {
				return Pos{}, false, fmt.Errorf("%w: %s at offset %d: %s, and the index covers the log past it, to offset %d of %s (a later frame's mark shows it synced, or later frames carry no marks)",
					ErrDamaged, l.path(n), off, badWhy(why, zeros), top.Off, segName(top.Seg))
			}
			return Pos{n, off}, true, nil
		}
	}
	return Pos{}, false, nil
}

// headerAt reads the frame header at p, if one is there and intact.
func (l *segLog) headerAt(p Pos) (frameHeader, bool) {
	f, err := l.file(p.Seg)
	if err != nil {
		return frameHeader{}, false
	}
	buf := make([]byte, frameHeaderSize)
	n, _ := f.ReadAt(buf, p.Off)
	fh, err := parseFrameHeader(buf[:n])
	return fh, err == nil
}

func badWhy(why string, zeros bool) string {
	if zeros {
		return "zeros where frames were"
	}
	return why
}

// revert is one index key a catch-down sets back: to val, or deleted
// (val nil).
type revert struct {
	key []byte
	val []byte
}

// frameKey reports whether key is one a frame's ops write.
func (b *Badger) frameKey(key []byte) bool {
	if bytes.Equal(key, keyCompacted) {
		return true
	}
	for _, p := range b.frameKeys {
		if bytes.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// reverts returns what the index must lose to be back at x, the first
// bad frame of a torn tail (see above), with vers the versions of
// "m/logpos" (newest first) and past the objects of the intact frames
// after x. Nothing is written.
func (b *Badger) reverts(x Pos, vers []posVersion, past []blobEntry) ([]revert, error) {
	intact := make(map[Pos]bool, len(past))
	for _, e := range past {
		intact[Pos{e.loc.Seg, e.loc.Off}] = true
	}
	var vx uint64
	haveVX := false
	for _, v := range vers {
		if !posLess(x, v.pos) {
			vx, haveVX = v.ver, true
			break
		}
	}
	beyond := func(v []byte) bool {
		loc, err := decodeLoc(v)
		return err == nil && !posLess(Pos{loc.Seg, loc.Off}, x)
	}
	var out []revert
	err := b.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.AllVersions = true
		opts.PrefetchValues = false // only the l and frame keys are read
		it := txn.NewIterator(opts)
		defer it.Close()
		var key []byte
		state := 0 // 0: deciding the newest version, 1: looking for the older one, 2: done with key
		isLoc := false
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.Key()
			if !bytes.Equal(k, key) {
				if state == 1 {
					out = append(out, revert{key: key}) // no older version: delete
				}
				key, state = item.KeyCopy(nil), 0
				isLoc = len(k) == keyLen && k[0] == LogPrefix
				if !isLoc && (!haveVX || !b.frameKey(k) || bytes.Equal(k, KeyLogPos)) {
					state = 2
					continue
				}
			}
			switch state {
			case 0:
				if isLoc {
					if item.IsDeletedOrExpired() {
						state = 2
						continue
					}
					v, err := item.ValueCopy(nil)
					if err != nil {
						return err
					}
					state = 2
					if beyond(v) {
						if loc, _ := decodeLoc(v); haveVX && item.Version() <= vx && intact[Pos{loc.Seg, loc.Off}] {
							// Known before the position at or before
							// x was written: not a write-back of a
							// frame after it (see above).
							return fmt.Errorf("%w: %s at offset %d: a bad frame, and the index knew the frame at offset %d of %s after it before its position",
								ErrDamaged, b.log.path(x.Seg), x.Off, loc.Off, segName(loc.Seg))
						}
						state = 1
					}
					continue
				}
				state = 2
				if item.Version() > vx {
					state = 1
				}
			case 1:
				var v []byte
				if !item.IsDeletedOrExpired() {
					var err error
					if v, err = item.ValueCopy(nil); err != nil {
						return err
					}
				}
				if isLoc && v != nil && beyond(v) {
					continue // also a dropped frame's
				}
				if !isLoc && item.Version() > vx {
					continue
				}
				out = append(out, revert{key: key, val: v})
				state = 2
			}
		}
		if state == 1 {
			out = append(out, revert{key: key})
		}
		return nil
	})
	return out, err
}

// catchDownAt returns the position a catch-down to x goes back to: the
// newest "m/logpos" at or before x (Pos{} if none: the start of the log).
func catchDownAt(x Pos, vers []posVersion) Pos {
	for _, v := range vers {
		if !posLess(x, v.pos) {
			return v.pos
		}
	}
	return Pos{}
}

// writeReverts writes the reverts as one unsynced batch (CatchUp syncs
// the index before it cuts the log).
func (b *Badger) writeReverts(wb *badger.WriteBatch, rs []revert) error {
	for _, r := range rs {
		var err error
		if r.val == nil {
			err = wb.Delete(r.key)
		} else {
			err = wb.Set(r.key, r.val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
