package replica

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// The segment format:
//
//	"RFSSEG01" first(8, BE) last(8, BE) count(4, BE) record... sum(32)
//	record: length (uvarint, minimal) and the journal encoding
//
// The records are every record the writer's store retained with a seq
// in first..last, in seq order: the range tiles the workspace's seqs
// (the next segment starts at last+1), and a seq without a record is
// one the writer never had or had dropped below its floor. sum is the
// BLAKE3 of everything before it.
const (
	segMagic  = "RFSSEG01"
	segHeader = len(segMagic) + 8 + 8 + 4
)

// Segment is a decoded segment.
type Segment struct {
	Epoch, First, Last uint64
	Records            []*journal.Record
}

// SegmentKey names the segment of epoch e with seqs first..last of ws
// as reynfs wrote them before segment keys had salt (see saltedKey).
func SegmentKey(ws string, e, first, last uint64) string {
	return fmt.Sprintf("%s%d-%d-%d.seg", segPrefix(ws), e, first, last)
}

// saltedSegmentKey is the key a push writes a segment under: SegmentKey
// with 8 random bytes (hex) before ".seg", so that no two writes of a
// segment share a key. A push that sends again the records of a segment
// remote GC condemned (left past HEAD by a push cut off) never writes
// under the key GC deletes; readers take either form (ParseSegmentKey).
func saltedSegmentKey(ws string, e, first, last uint64) (string, error) {
	var salt [8]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s%d-%d-%d-%x.seg", segPrefix(ws), e, first, last, salt), nil
}

func segPrefix(ws string) string { return "ws/" + ws + "/seg/" }

// ParseSegmentKey reads epoch, first and last from a segment key of ws
// (decimal, no leading zeros, first ≤ last; then, in a key written since
// segments have salt, 16 lower-case hex digits).
func ParseSegmentKey(ws, key string) (e, first, last uint64, ok bool) {
	rest, found := strings.CutPrefix(key, segPrefix(ws))
	if !found {
		return 0, 0, 0, false
	}
	rest, found = strings.CutSuffix(rest, ".seg")
	parts := strings.Split(rest, "-")
	if len(parts) == 4 {
		salt := parts[3]
		if len(salt) != 16 || strings.Trim(salt, "0123456789abcdef") != "" {
			return 0, 0, 0, false
		}
		parts = parts[:3]
	}
	if !found || len(parts) != 3 {
		return 0, 0, 0, false
	}
	var v [3]uint64
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil || strconv.FormatUint(n, 10) != p {
			return 0, 0, 0, false
		}
		v[i] = n
	}
	if v[0] == 0 || v[1] == 0 || v[1] > v[2] {
		return 0, 0, 0, false
	}
	return v[0], v[1], v[2], true
}

// EncodeSegment encodes records (in seq order, all within first..last).
func EncodeSegment(first, last uint64, records []*journal.Record) ([]byte, error) {
	if first == 0 || first > last {
		return nil, fmt.Errorf("encode segment: range %d-%d", first, last)
	}
	b := make([]byte, 0, segHeader+64*len(records)+32)
	b = append(b, segMagic...)
	b = binary.BigEndian.AppendUint64(b, first)
	b = binary.BigEndian.AppendUint64(b, last)
	b = binary.BigEndian.AppendUint32(b, uint32(len(records)))
	prev := first - 1
	for _, r := range records {
		if r.Seq <= prev || r.Seq > last {
			return nil, fmt.Errorf("encode segment %d-%d: record seq %d out of order", first, last, r.Seq)
		}
		prev = r.Seq
		v := journal.Encode(r)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	sum := cas.Sum(b)
	return append(b, sum[:]...), nil
}

// DecodeSegment decodes the segment stored under key (a segment key of
// ws) exactly as EncodeSegment writes it, checking its checksum first and
// that its range is the one its key names.
func DecodeSegment(ws, key string, b []byte) (*Segment, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: segment %s", key, ErrCorrupt, fmt.Sprintf(format, args...))
	}
	e, first, last, ok := ParseSegmentKey(ws, key)
	if !ok {
		return nil, fmt.Errorf("%s: %w: not a segment key of workspace %s", key, ErrCorrupt, ws)
	}
	if len(b) < segHeader+32 || string(b[:len(segMagic)]) != segMagic {
		return nil, bad("header missing")
	}
	if sum := cas.Sum(b[:len(b)-32]); !bytes.Equal(sum[:], b[len(b)-32:]) {
		return nil, bad("checksum mismatch")
	}
	s := &Segment{Epoch: e, First: binary.BigEndian.Uint64(b[8:]), Last: binary.BigEndian.Uint64(b[16:])}
	if s.First != first || s.Last != last {
		return nil, bad("holds %d-%d, its key says %d-%d", s.First, s.Last, first, last)
	}
	n := int(binary.BigEndian.Uint32(b[24:]))
	p := b[segHeader : len(b)-32]
	if n > len(p)/2 {
		return nil, bad("%d records in %d bytes", n, len(p))
	}
	s.Records = make([]*journal.Record, 0, n)
	prev := first - 1
	for i := range n {
		l, k := binary.Uvarint(p)
		if k <= 0 || k != len(binary.AppendUvarint(nil, l)) || l > uint64(len(p)-k) {
			return nil, bad("record %d: bad length", i)
		}
		r, err := journal.Decode(p[k : k+int(l)])
		if err != nil {
			return nil, bad("record %d: %v", i, err)
		}
		if r.Seq <= prev || r.Seq > last {
			return nil, bad("record %d: seq %d out of order", i, r.Seq)
		}
		prev = r.Seq
		s.Records = append(s.Records, r)
		p = p[k+int(l):]
	}
	if len(p) != 0 {
		return nil, bad("%d bytes after the last record", len(p))
	}
	return s, nil
}
