package cas

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// KeyLogPos is the Badger key (in the journal's "m/" namespace, claimed
// in journal/doc.go) holding the log position the index covers: every
// frame that ends at or before it has its index writes in Badger.
var KeyLogPos = []byte("m/logpos")

// logFrame is one complete frame found by a scan.
type logFrame struct {
	at    Pos // where its header starts
	end   int64
	blobs []blobEntry // offsets made absolute in segment at.Seg
	ops   []Op
}

// scanResult is what lies in the log from a position to its end.
type scanResult struct {
	frames []logFrame
	end    Pos  // end of the last complete frame (or from)
	cut    bool // a torn tail follows end: cut it at end
	// drop is the segments after end that the cut removes, ascending: a
	// last segment whose creation was torn (shorter than a header, or a
	// header of zeros), or those after a tail no sync covered.
	drop []uint64
	// past is the objects of the intact frames a cut drops, where they
	// were: an index that points at one is ahead of the cut (CatchUp).
	past   []blobEntry
	damage error // wraps ErrDamaged; frames holds what precedes it
}

// scan reads the log from pos to its end. A segment's frames end where
// only zeros follow (its pre-written space, prefill.go: the file's size
// is not the log's end). A torn tail is reported in cut (and drop): a bad
// frame (incomplete, checksum-failing, or zeros where a frame should be)
// that no sync covered, which the frames after it tell by their
// synced-through marks (tailAt). Damage is reported in damage: a bad
// frame that a sync covered or that frames without marks follow, a
// missing segment or a segment of another store.
func (l *segLog) scan(from Pos) (scanResult, error) {
	res := scanResult{end: from}
	segs, err := listSegments(l.dir)
	if err != nil {
		return res, err
	}
	if len(segs) == 0 {
		if from.Seg != 0 {
			res.damage = fmt.Errorf("%w: %s: the index covers segment %s, the log holds no segment", ErrDamaged, l.dir, segName(from.Seg))
		}
		return res, nil
	}
	if from.Seg == 0 {
		from = Pos{segs[0], segHeaderSize}
		res.end = from
	}
	last := segs[len(segs)-1]
	have := make(map[uint64]bool, len(segs))
	for _, n := range segs {
		have[n] = true
	}
	for n := from.Seg; n <= last; n++ {
		if !have[n] {
			res.damage = fmt.Errorf("%w: %s missing (the log runs from %s to %s)", ErrDamaged, l.path(n), segName(from.Seg), segName(last))
			return res, nil
		}
	}
	for n := from.Seg; n <= last; n++ {
		off := int64(segHeaderSize)
		if n == from.Seg {
			off = from.Off
		}
		hdr, data, err := l.readSegment(n, off)
		if err != nil {
			return res, err
		}
		if herr := checkSegHeader(hdr, n, l.id); herr != nil {
			if n == last && n != from.Seg && (len(hdr) < segHeaderSize || allZero(hdr)) {
				res.drop = []uint64{n} // torn while being created
				return res, nil
			}
			res.damage = fmt.Errorf("%w: %s at offset 0: %v", ErrDamaged, l.path(n), herr)
			return res, nil
		}
		if off < segHeaderSize || off > data.end() {
			res.damage = fmt.Errorf("%w: %s is %d bytes, the index covers it to offset %d", ErrDamaged, l.path(n), data.end(), off)
			return res, nil
		}
		res.end = Pos{n, off}
		for off < data.end() {
			fh, fr, why := frameAt(data, off)
			if why != "" {
				zeros := allZero(data.slice(off, data.end()))
				if zeros && n == last {
					// Pre-written space (prefill.go), or zeros a
					// crash left of it: the segment's clean end.
					break
				}
				v, past, err := l.tailAt(data, off, n, last, zeros)
				if err != nil {
					return res, err
				}
				switch {
				case v == tailClean:
					// A sealed segment's zeros, its truncation at
					// the roll lost: its clean end.
				case v == tailDamage && zeros:
					res.damage = fmt.Errorf("%w: %s at offset %d: zeros where synced frames were, with more log after them", ErrDamaged, l.path(n), off)
				case v == tailDamage:
					res.damage = fmt.Errorf("%w: %s at offset %d: %s, with more log after it", ErrDamaged, l.path(n), off, why)
				default:
					res.cut, res.past = true, past
					for m := n + 1; m <= last; m++ {
						res.drop = append(res.drop, m)
					}
				}
				if v == tailClean {
					break
				}
				return res, nil
			}
			blobs, ops, err := decodePayload(data.slice(off+int64(fh.size), fr))
			if err != nil {
				res.damage = fmt.Errorf("%s at offset %d: %w", l.path(n), off, err)
				return res, nil
			}
			for i := range blobs {
				blobs[i].loc.Seg = n
				blobs[i].loc.Off += off + int64(fh.size)
				blobs[i].data = nil
			}
			for i := range ops {
				// Copies, so that the segment's buffer is not kept
				// alive by a scan of the whole log (salvage).
				ops[i].Key = bytes.Clone(ops[i].Key)
				if ops[i].Val != nil {
					ops[i].Val = bytes.Clone(ops[i].Val)
				}
			}
			res.frames = append(res.frames, logFrame{at: Pos{n, off}, end: fr, blobs: blobs, ops: ops})
			off = fr
			res.end = Pos{n, off}
		}
	}
	return res, nil
}

// segBytes is the part of a segment from base to its end, addressed by
// segment offsets.
type segBytes struct {
	base int64
	b    []byte
}

func (d segBytes) end() int64                  { return d.base + int64(len(d.b)) }
func (d segBytes) slice(from, to int64) []byte { return d.b[from-d.base : to-d.base] }

// frameAt checks the frame at off and returns its header and where it
// ends, or why it is not a complete, intact frame.
func frameAt(data segBytes, off int64) (fh frameHeader, end int64, why string) {
	if data.end()-off < frameHeaderV2Size {
		return fh, 0, "incomplete frame header"
	}
	fh, err := parseFrameHeader(data.slice(off, min(off+frameHeaderSize, data.end())))
	if err != nil {
		return fh, 0, err.Error()
	}
	end = off + int64(fh.size) + int64(fh.length)
	if end > data.end() {
		return fh, 0, "incomplete frame"
	}
	if crc32.Checksum(data.slice(off+int64(fh.size), end), castagnoli) != fh.crc {
		return fh, 0, "frame checksum mismatch"
	}
	return fh, end, ""
}

// framesAfter calls fn with the header, start and end of every intact
// frame that starts at or after off, found by its magic: a bad frame's
// length cannot be trusted to say where the next one starts.
func framesAfter(data segBytes, off int64, fn func(fh frameHeader, at, end int64)) {
	magic := []byte("RFM") // frameMagic and frameMagicV2
	for off < data.end() {
		i := bytes.Index(data.slice(off, data.end()), magic)
		if i < 0 {
			return
		}
		if fh, end, why := frameAt(data, off+int64(i)); why == "" {
			fn(fh, off+int64(i), end)
		}
		off += int64(i) + 1
	}
}

// What a bad frame, or a sealed segment's zero tail, is (tailAt).
const (
	tailTorn   = iota // no sync covered it: cut the log there
	tailDamage        // a sync covered it, or frames without marks follow
	tailClean         // a sealed segment's zero tail that is its end
)

// tailAt says what the bad frame at off in segment n is, or (zeros) the
// zeros from off to the end of segment n before the last. A power cut
// keeps the blocks written since the last completed fdatasync in any
// order, so a frame no sync covered can be zeros or torn while a later
// one is whole; each frame's mark (frame.go) says how far the log was
// durable when it was written. So: an intact frame after the bad one
// (in segment n or a later one: a roll does not sync the old segment)
// whose mark lies beyond off proves off was synced: damage. If every
// intact frame after it has a mark at or before off, nothing from off on
// was ever synced: a torn tail. An intact frame without a mark (written
// by store format 5 or older) proves nothing: the rule of that format
// holds (a bad frame is damage, zeros are a sealed segment's end). With
// no intact frame after it, a bad frame is a torn tail and zeros are a
// sealed segment's end.
//
// A sealed segment keeps a zero tail only if its truncation at the roll
// was lost, so no sync completed after the roll (a sync covers the old
// segment too): a mark in a later segment then cannot be trusted to say
// where segment n ended, and only a mark in segment n past off is damage.
//
// It also returns the objects of the intact frames after off, where they
// are (a torn tail's cut drops them).
func (l *segLog) tailAt(data segBytes, off int64, n, last uint64, zeros bool) (int, []blobEntry, error) {
	at := Pos{n, off}
	var beyond, unmarked, found bool
	var past []blobEntry
	seg := n
	note := func(fh frameHeader, from, end int64) {
		found = true
		if blobs, _, err := decodePayload(data.slice(from+int64(fh.size), end)); err == nil {
			for _, e := range blobs {
				e.loc.Seg, e.loc.Off, e.data = seg, e.loc.Off+from+int64(fh.size), nil
				past = append(past, e)
			}
		}
		switch {
		case !fh.marked:
			unmarked = true
		case zeros && fh.mark.Seg == n && fh.mark.Off > off:
			beyond = true
		case zeros && fh.mark.Seg > n:
			unmarked = true // segment n was synced whole: its zeros say nothing
		case !zeros && posLess(at, fh.mark):
			beyond = true
		}
	}
	framesAfter(data, off+1, note)
	for m := n + 1; m <= last; m++ {
		hdr, d, err := l.readSegment(m, segHeaderSize)
		if err != nil {
			return 0, nil, err
		}
		if checkSegHeader(hdr, m, l.id) != nil {
			if m == last && (len(hdr) < segHeaderSize || allZero(hdr)) {
				continue // torn while being created: the cut drops it
			}
			found, unmarked = true, true // not a crash's doing
			continue
		}
		data, seg = d, m
		framesAfter(data, segHeaderSize, note)
	}
	switch {
	case beyond:
		return tailDamage, nil, nil
	case unmarked || !found:
		if zeros {
			return tailClean, nil, nil
		}
		if unmarked {
			return tailDamage, nil, nil
		}
	}
	return tailTorn, past, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// readSegment returns segment n's header (shorter if the file is) and its
// bytes from off to the end: an open reads only the tail past the index,
// not whole segments.
func (l *segLog) readSegment(n uint64, off int64) ([]byte, segBytes, error) {
	f, err := l.file(n)
	if err != nil {
		return nil, segBytes{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, segBytes{}, err
	}
	size := fi.Size()
	hdr := make([]byte, min(size, segHeaderSize))
	if _, err := f.ReadAt(hdr, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, segBytes{}, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	off = min(max(off, 0), size)
	data := make([]byte, size-off)
	if _, err := f.ReadAt(data, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, segBytes{}, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return hdr, segBytes{off, data}, nil
}

// cutTail removes what a crash tore off the end of the log: the segments
// after the cut (one whose creation was torn, or those after a tail no
// sync covered), then the torn frames (the segment is truncated at
// res.end).
func (l *segLog) cutTail(res scanResult) error {
	// The last segment first, each removal durable before the next: a
	// crash part way leaves a log whose scan finds the same tail, never
	// a gap or a cut segment followed by whole ones.
	for i := len(res.drop) - 1; i >= 0; i-- {
		n := res.drop[i]
		l.rmu.Lock()
		if f := l.files[n]; f != nil {
			_ = f.Close()
			delete(l.files, n)
		}
		l.rmu.Unlock()
		if err := os.Remove(l.path(n)); err != nil {
			return err
		}
		if err := l.dirf.Sync(); err != nil {
			return err
		}
		if l.fault != nil {
			if err := l.fault("cut"); err != nil {
				return fmt.Errorf("cut: injected fault: %w", err)
			}
		}
	}
	if !res.cut {
		return nil
	}
	f, err := l.file(res.end.Seg)
	if err != nil {
		return err
	}
	if err := f.Truncate(res.end.Off); err != nil {
		return fmt.Errorf("cut torn tail of %s at %d: %w", f.Name(), res.end.Off, err)
	}
	return f.Sync()
}

// CatchUp brings the index up to the log: it reads the position the index
// covers, scans the log from there and applies each complete frame's
// index writes (idempotent, so a crash during catch-up is harmless). A
// writable store cuts a torn tail and writes the index; a read-only one
// keeps what it found in memory (Tail.KV and the object overlay) and
// writes nothing. Damage is returned as an error wrapping ErrDamaged
// unless keepDamaged is set, when it is only reported in Tail.Damage.
func (b *Badger) CatchUp(keepDamaged bool) (*Tail, error) {
	l := b.log
	from, err := b.logPos()
	if err != nil {
		return nil, fmt.Errorf("catch up: %w", err)
	}
	indexed := from
	salvage := keepDamaged && l.readOnly
	if salvage {
		// Salvage: read the whole log, so that what a damaged index
		// lost (an unreadable table, say) is found in the log itself.
		from, b.salvaged = Pos{}, &indexed
	}
	// The index may be ahead of the log (catchdown.go): its position
	// past a torn tail.
	vers, err := b.logPosVersions()
	if err != nil {
		return nil, fmt.Errorf("catch up: %w", err)
	}
	var down bool // the index's position lies past a torn tail
	var downErr error
	if !salvage {
		x, ok, err := b.aheadAt(vers)
		switch {
		case errors.Is(err, ErrDamaged):
			downErr = err
		case err != nil:
			return nil, fmt.Errorf("catch up: %w", err)
		case ok:
			from = catchDownAt(x, vers)
			indexed, down = from, true
		}
	}
	res, err := l.scan(from)
	if err != nil {
		return nil, fmt.Errorf("catch up: %w", err)
	}
	if res.damage == nil && downErr != nil {
		res.damage = downErr
	}
	if res.damage == nil && posLess(res.end, indexed) {
		res.damage = fmt.Errorf("%w: %s: the log ends at offset %d, the index covers it to offset %d",
			ErrDamaged, l.path(res.end.Seg), res.end.Off, indexed.Off)
	}
	// A torn tail: what the index knows of frames from it on (written
	// back by the kernel from Badger's mapped WAL, never synced) goes.
	var rs []revert
	if res.damage == nil && (down || res.cut || len(res.drop) > 0) {
		rs, err = b.reverts(res.end, vers, res.past)
		switch {
		case errors.Is(err, ErrDamaged):
			res.damage, rs = err, nil
		case err != nil:
			return nil, fmt.Errorf("catch up: %w", err)
		case salvage:
			rs = nil // salvage reads the whole log: it needs none
		}
	}
	t := &Tail{Frames: len(res.frames), End: res.end, EndFile: l.path(res.end.Seg), Torn: res.cut || len(res.drop) > 0 || down, Damage: res.damage, KV: map[string][]byte{}, Reverted: len(rs)}
	if res.damage != nil && !keepDamaged {
		return t, res.damage
	}
	for _, f := range res.frames {
		t.Bytes += f.end - f.at.Off
	}
	if l.readOnly {
		b.tail = map[Hash]Loc{}
		for _, r := range rs {
			if len(r.key) == keyLen && r.key[0] == LogPrefix {
				var h Hash
				copy(h[:], r.key[1:])
				if loc, err := decodeLoc(r.val); r.val != nil && err == nil {
					b.tail[h] = loc
				} else {
					if b.hidden == nil {
						b.hidden = map[Hash]bool{}
					}
					b.hidden[h] = true
				}
				continue
			}
			t.KV[string(r.key)] = r.val
		}
		for _, f := range res.frames {
			for _, e := range f.blobs {
				b.tail[e.h] = e.loc
				delete(b.hidden, e.h)
			}
			if posLess(f.at, indexed) {
				// Salvage read this frame only for its objects: its
				// key writes are in the index, and replaying them over
				// it would bring back what Truncate dropped since.
				continue
			}
			for _, o := range f.ops {
				if o.Del {
					t.KV[string(o.Key)] = nil
				} else {
					t.KV[string(o.Key)] = o.Val
				}
			}
		}
		return t, nil
	}
	if res.damage != nil {
		return t, res.damage // never write past damage
	}
	if len(rs) > 0 || down {
		// Durable before the cut: a crash after it must not find the
		// index past a log whose frames no longer show (by their marks)
		// that no sync covered them.
		wb := b.db.NewWriteBatch()
		defer wb.Cancel()
		if err := b.writeReverts(wb, rs); err != nil {
			return nil, fmt.Errorf("catch down: %w", err)
		}
		if from != (Pos{}) {
			if err := wb.Set(KeyLogPos, from.encode()); err != nil {
				return nil, fmt.Errorf("catch down: %w", err)
			}
		}
		if err := wb.Flush(); err != nil {
			return nil, fmt.Errorf("catch down: %w", err)
		}
		if err := b.db.Sync(); err != nil {
			return nil, fmt.Errorf("catch down: sync index: %w", err)
		}
		if b.fault != nil {
			if err := b.fault("catchdown"); err != nil {
				return nil, fmt.Errorf("catch down: injected fault: %w", err)
			}
		}
	}
	if err := l.cutTail(res); err != nil {
		return nil, fmt.Errorf("catch up: %w", err)
	}
	if len(res.frames) > 0 {
		if b.fault != nil {
			if err := b.fault("catchup"); err != nil {
				return nil, fmt.Errorf("catch up: injected fault: %w", err)
			}
		}
		wb := b.db.NewWriteBatch()
		defer wb.Cancel()
		for _, f := range res.frames {
			if err := applyFrame(wb, f.blobs, f.ops); err != nil {
				return nil, fmt.Errorf("catch up: %w", err)
			}
		}
		if err := wb.Set(KeyLogPos, res.end.encode()); err != nil {
			return nil, fmt.Errorf("catch up: %w", err)
		}
		if err := wb.Flush(); err != nil {
			return nil, fmt.Errorf("catch up: %w", err)
		}
		// The frames may be in the page cache only (a kill -9 before
		// their sync): make them durable before the index that claims
		// them, so a power cut now cannot leave the index past the log.
		for n := res.frames[0].at.Seg; n <= res.end.Seg; n++ {
			f, err := l.file(n)
			if err == nil {
				err = unix.Fdatasync(int(f.Fd()))
			}
			if err != nil {
				return nil, fmt.Errorf("catch up: sync %s: %w", l.path(n), err)
			}
		}
		if err := b.db.Sync(); err != nil {
			return nil, fmt.Errorf("catch up: sync index: %w", err)
		}
	}
	end := res.end
	if end.Seg == 0 {
		// An empty log: start the first segment.
		if err := l.create(1); err != nil {
			return nil, fmt.Errorf("catch up: %w", err)
		}
		end = Pos{1, segHeaderSize}
	}
	if err := l.resume(end.Seg, end.Off); err != nil {
		return nil, fmt.Errorf("catch up: %w", err)
	}
	return t, nil
}
