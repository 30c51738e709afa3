package cas

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
)

// LogEntry is one piece of a segment as LogEntries reports it, so that a
// measuring tool (test/bench/storesize) can say what each byte of the log
// is without knowing the segment format.
type LogEntry struct {
	Seg uint64
	// Kind is the entry kind of a frame's payload ('c' blob, 'b' blob
	// with its name (formats 2 and 3), 'D' delta, 'P' pack of small
	// objects (format 5), 's' key set, 'd' key
	// delete), or 'H' for a segment header, 'F' for a frame header and
	// 'T' for bytes past the last complete frame.
	Kind byte
	Hash Hash   // blobs and deltas (computed for a 'c' blob)
	Comp byte   // blobs: compRaw or compZstd
	Key  []byte // key sets and deletes (valid during the call only)
	Head int    // bytes of the entry before its data (kind, name, lengths)
	Data int    // a blob's or pack's stored bytes, a set's value bytes
	// A pack ('P'): its objects' names and lengths, in pack order.
	Members   []Hash
	MemberRaw []int
}

// LogEntries calls fn for every header and entry of the segments in
// logDir, in log order. It reads the files only (no store need be open)
// and stops at the first frame that does not parse; the rest of that
// segment is reported as one 'T' entry.
func LogEntries(logDir string, fn func(LogEntry) error) error {
	segs, err := listSegments(logDir)
	if err != nil {
		return err
	}
	for _, n := range segs {
		b, err := os.ReadFile(filepath.Join(logDir, segName(n)))
		if err != nil {
			return fmt.Errorf("read segment: %w", err)
		}
		if err := segmentEntries(n, b, fn); err != nil {
			return err
		}
	}
	return nil
}

func segmentEntries(n uint64, b []byte, fn func(LogEntry) error) error {
	if len(b) < segHeaderSize {
		return fn(LogEntry{Seg: n, Kind: 'T', Data: len(b)})
	}
	if err := fn(LogEntry{Seg: n, Kind: 'H', Head: segHeaderSize}); err != nil {
		return err
	}
	off := segHeaderSize
	for off < len(b) {
		fh, err := parseFrameHeader(b[off:])
		if err != nil || len(b)-off-fh.size < fh.length {
			return fn(LogEntry{Seg: n, Kind: 'T', Data: len(b) - off})
		}
		p := b[off+fh.size : off+fh.size+fh.length]
		blobs, ops, err := decodePayload(p)
		if err != nil {
			return fn(LogEntry{Seg: n, Kind: 'T', Data: len(b) - off})
		}
		if err := fn(LogEntry{Seg: n, Kind: 'F', Head: fh.size}); err != nil {
			return err
		}
		// Entries are contiguous: each blob's header runs from the end
		// of the previous entry to its data.
		at := 0
		for k := 0; k < len(blobs); k++ {
			e := blobs[k]
			kind, comp := e.kind, e.loc.Comp
			if kind == entryDelta {
				comp = compRaw
			}
			le := LogEntry{Seg: n, Kind: kind, Hash: e.h, Comp: comp, Head: int(e.loc.Off) - at, Data: int(e.loc.Stored)}
			if kind == entryPack {
				// One entry for the pack; its objects follow in blobs
				// with the same offset.
				le.Hash, le.Comp = Hash{}, compZstd
				for ; k < len(blobs) && blobs[k].kind == entryPack && blobs[k].loc.Off == e.loc.Off; k++ {
					le.Members = append(le.Members, blobs[k].h)
					le.MemberRaw = append(le.MemberRaw, int(blobs[k].loc.Raw))
				}
				k--
			}
			if err := fn(le); err != nil {
				return err
			}
			at = int(e.loc.Off) + int(e.loc.Stored)
		}
		rest := len(p) - at // the ops, in order
		for _, o := range ops {
			kind := byte(entrySet)
			if o.Del {
				kind = entryDel
			}
			e := LogEntry{Seg: n, Kind: kind, Key: o.Key, Data: len(o.Val)}
			e.Head = entryLen(o) - e.Data
			rest -= e.Head + e.Data
			if err := fn(e); err != nil {
				return err
			}
		}
		if rest != 0 {
			return fmt.Errorf("segment %s frame at %d: %d payload bytes unaccounted", segName(n), off, rest)
		}
		off += fh.size + fh.length
	}
	return nil
}

// entryLen is the encoded length of an op entry (see encodeFrame).
func entryLen(o Op) int {
	n := 1 + uvarintLen(uint64(len(o.Key))) + len(o.Key)
	if !o.Del {
		n += uvarintLen(uint64(len(o.Val))) + len(o.Val)
	}
	return n
}

// uvarintLen is how many bytes binary.AppendUvarint takes for v.
func uvarintLen(v uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], v)
}
