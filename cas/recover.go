package cas

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
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
	// dropSeg is a last segment whose creation was torn (shorter than a
	// header, or a header of zeros): remove it.
	dropSeg uint64
	damage  error // wraps ErrDamaged; frames holds what precedes it
}

// scan reads the log from pos to its end. A segment's frames end where
// only zeros follow (its pre-written space, prefill.go: the file's size
// is not the log's end). A torn tail (an incomplete or checksum-failing
// frame, followed by anything but an intact frame, in the last segment)
// is reported in cut, damage in damage: a bad frame followed by a valid
// one, a bad frame before the last segment, a missing segment or a
// segment of another store.
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
				res.dropSeg = n // torn while being created
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
			fr, why := frameAt(data, off)
			if why != "" {
				if allZero(data.slice(off, data.end())) {
					// Pre-written space (prefill.go), or zeros a
					// crash left of it: the segment's clean end.
					break
				}
				if n != last || validFrameAfter(data, off+1) {
					res.damage = fmt.Errorf("%w: %s at offset %d: %s, with more log after it", ErrDamaged, l.path(n), off, why)
				} else {
					res.cut = true
				}
				return res, nil
			}
			blobs, ops, err := decodePayload(data.slice(off+frameHeaderSize, fr))
			if err != nil {
				res.damage = fmt.Errorf("%s at offset %d: %w", l.path(n), off, err)
				return res, nil
			}
			for i := range blobs {
				blobs[i].loc.Seg = n
				blobs[i].loc.Off += off + frameHeaderSize
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

// frameAt checks the frame at off and returns where it ends, or why it is
// not a complete, intact frame.
func frameAt(data segBytes, off int64) (end int64, why string) {
	if data.end()-off < frameHeaderSize {
		return 0, "incomplete frame header"
	}
	fh, err := parseFrameHeader(data.slice(off, off+frameHeaderSize))
	if err != nil {
		return 0, err.Error()
	}
	end = off + frameHeaderSize + int64(fh.length)
	if end > data.end() {
		return 0, "incomplete frame"
	}
	if crc32.Checksum(data.slice(off+frameHeaderSize, end), castagnoli) != fh.crc {
		return 0, "frame checksum mismatch"
	}
	return end, ""
}

// validFrameAfter reports whether an intact frame starts anywhere at or
// after off: a crash tears only the last frame, so one is damage.
func validFrameAfter(data segBytes, off int64) bool {
	var magic [4]byte
	binary.BigEndian.PutUint32(magic[:], frameMagic)
	for off < data.end() {
		i := bytes.Index(data.slice(off, data.end()), magic[:])
		if i < 0 {
			return false
		}
		if _, why := frameAt(data, off+int64(i)); why == "" {
			return true
		}
		off += int64(i) + 1
	}
	return false
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

// cutTail removes what a crash tore off the end of the log: the torn
// frame (the last segment is truncated at res.end) or a segment whose
// creation was torn.
func (l *segLog) cutTail(res scanResult) error {
	if res.dropSeg != 0 {
		l.rmu.Lock()
		if f := l.files[res.dropSeg]; f != nil {
			_ = f.Close()
			delete(l.files, res.dropSeg)
		}
		l.rmu.Unlock()
		if err := os.Remove(l.path(res.dropSeg)); err != nil {
			return err
		}
		return l.dirf.Sync()
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
