package journal

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/reynfs/reynfs/cas"
)

// formatV1 is the first byte of every encoded record.
const formatV1 = 1

// MaxRecordSize bounds one encoded record. The largest realistic record is an
// OpData for a 1 GiB write (16 Ki chunk slots, about 600 KiB); anything much
// larger is a bug or garbage.
const MaxRecordSize = 16 << 20

// Field tags, in the fixed order Encode writes them. A tag is written only
// when its field is non-zero, so a record costs only the fields its op uses.
// Tags are part of the on-disk format: never renumber, only append.
const (
	tagParent = iota + 1
	tagName
	tagNewParent
	tagNewName
	tagIno
	tagMode
	tagUid
	tagGid
	tagRdev
	tagFlags
	tagTarget
	tagSize
	tagKind
	tagChunks
	tagValid
	tagAtime
	tagMtime
	tagXName
	tagXValue
	tagGenKind
	tagLabel
	tagRoot
	tagNextIno
	tagResetTo
	tagSupersedes
	tagAgents
	tagHoles
	tagRun   // who, not what: any op may carry it (validate.go)
	tagAgent // the run's agent
	tagMax
)

// Encode returns the binary form of r: the format version, the op, then Seq,
// Time, Pid and Comm, then each non-zero field as a tag byte and its value in
// tag order. Integers are uvarints (zigzag varints for times), strings and
// byte slices are length-prefixed, hashes are 32 raw bytes. An empty XValue
// is not written and decodes as nil.
func Encode(r *Record) []byte {
	b := make([]byte, 0, 64+len(r.Comm)+len(r.Run)+len(r.Agent)+len(r.Name)+len(r.NewName)+len(r.Target)+
		len(r.XName)+len(r.XValue)+len(r.GenKind)+len(r.Label)+len(r.Chunks)*36+len(r.Agents)*48)
	b = append(b, formatV1, byte(r.Op))
	b = binary.AppendUvarint(b, r.Seq)
	b = binary.AppendVarint(b, r.Time)
	b = binary.AppendUvarint(b, uint64(r.Pid))
	b = appendString(b, r.Comm)

	b = putUint(b, tagParent, r.Parent)
	b = putString(b, tagName, r.Name)
	b = putUint(b, tagNewParent, r.NewParent)
	b = putString(b, tagNewName, r.NewName)
	b = putUint(b, tagIno, r.Ino)
	b = putUint(b, tagMode, uint64(r.Mode))
	b = putUint(b, tagUid, uint64(r.Uid))
	b = putUint(b, tagGid, uint64(r.Gid))
	b = putUint(b, tagRdev, uint64(r.Rdev))
	b = putUint(b, tagFlags, uint64(r.Flags))
	b = putString(b, tagTarget, r.Target)
	b = putUint(b, tagSize, r.Size)
	b = putUint(b, tagKind, uint64(r.Kind))
	if len(r.Chunks) > 0 {
		b = append(b, tagChunks)
		b = binary.AppendUvarint(b, uint64(len(r.Chunks)))
		for _, c := range r.Chunks {
			b = binary.AppendUvarint(b, c.Index)
			b = append(b, c.Hash[:]...)
		}
	}
	b = putUint(b, tagValid, uint64(r.Valid))
	b = putInt(b, tagAtime, r.Atime)
	b = putInt(b, tagMtime, r.Mtime)
	b = putString(b, tagXName, r.XName)
	if len(r.XValue) > 0 {
		b = append(b, tagXValue)
		b = appendString(b, string(r.XValue))
	}
	b = putString(b, tagGenKind, r.GenKind)
	b = putString(b, tagLabel, r.Label)
	if !r.Root.IsZero() {
		b = append(b, tagRoot)
		b = append(b, r.Root[:]...)
	}
	b = putUint(b, tagNextIno, r.NextIno)
	b = putUint(b, tagResetTo, r.ResetTo)
	b = putUint(b, tagSupersedes, r.Supersedes)
	if len(r.Agents) > 0 {
		b = append(b, tagAgents)
		b = binary.AppendUvarint(b, uint64(len(r.Agents)))
		for _, a := range r.Agents {
			b = appendString(b, a.Name)
			b = append(b, a.State[:]...)
		}
	}
	if len(r.Holes) > 0 {
		// Each range as the gap since the previous range's end and its
		// length: a run of holes costs a few bytes wherever it lies.
		b = append(b, tagHoles)
		b = binary.AppendUvarint(b, uint64(len(r.Holes)))
		end := uint64(0)
		for _, h := range r.Holes {
			b = binary.AppendUvarint(b, h.Start-end)
			b = binary.AppendUvarint(b, h.Count)
			end = h.Start + h.Count
		}
	}
	b = putString(b, tagRun, r.Run)
	b = putString(b, tagAgent, r.Agent)
	return b
}

// EncodedLen returns len(Encode(r)) without encoding: Validate checks the
// size limit with it before a caller applies the operation, so a record
// the journal would refuse is refused while nothing has changed yet.
func (r *Record) EncodedLen() int {
	n := 2 + uvarintLen(r.Seq) + uvarintLen(zigzag(r.Time)) + uvarintLen(uint64(r.Pid)) + strLen(r.Comm)
	for _, v := range [...]uint64{r.Parent, r.NewParent, r.Ino, uint64(r.Mode), uint64(r.Uid), uint64(r.Gid),
		uint64(r.Rdev), uint64(r.Flags), r.Size, uint64(r.Kind), uint64(r.Valid), r.NextIno, r.ResetTo, r.Supersedes} {
		if v != 0 {
			n += 1 + uvarintLen(v)
		}
	}
	for _, v := range [...]int64{r.Atime, r.Mtime} {
		if v != 0 {
			n += 1 + uvarintLen(zigzag(v))
		}
	}
	for _, s := range [...]string{r.Name, r.NewName, r.Target, r.XName, string(r.XValue), r.GenKind, r.Label, r.Run, r.Agent} {
		if s != "" {
			n += 1 + strLen(s)
		}
	}
	if len(r.Chunks) > 0 {
		n += 1 + uvarintLen(uint64(len(r.Chunks)))
		for _, c := range r.Chunks {
			n += uvarintLen(c.Index) + len(c.Hash)
		}
	}
	if !r.Root.IsZero() {
		n += 1 + len(r.Root)
	}
	if len(r.Agents) > 0 {
		n += 1 + uvarintLen(uint64(len(r.Agents)))
		for _, a := range r.Agents {
			n += strLen(a.Name) + len(a.State)
		}
	}
	if len(r.Holes) > 0 {
		n += 1 + uvarintLen(uint64(len(r.Holes)))
		end := uint64(0)
		for _, h := range r.Holes {
			n += uvarintLen(h.Start-end) + uvarintLen(h.Count)
			end = h.Start + h.Count
		}
	}
	return n
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func strLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func putUint(b []byte, tag byte, v uint64) []byte {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(append(b, tag), v)
}

func putInt(b []byte, tag byte, v int64) []byte {
	if v == 0 {
		return b
	}
	return binary.AppendVarint(append(b, tag), v)
}

func putString(b []byte, tag byte, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, tag), s)
}

// Decode parses bytes written by Encode. It accepts only the canonical form
// Encode produces (minimal varints, tags in increasing order, no zero-valued
// fields), so Encode(Decode(b)) == b. Errors wrap ErrCorrupt; Decode never
// panics on any input.
func Decode(b []byte) (*Record, error) {
	r, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("decode record: %w: %w", ErrCorrupt, err)
	}
	return r, nil
}

func decode(b []byte) (*Record, error) {
	if len(b) > MaxRecordSize {
		return nil, fmt.Errorf("%d bytes, more than the %d-byte limit", len(b), MaxRecordSize)
	}
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != formatV1 {
		return nil, fmt.Errorf("record format version %d, this reynfs reads %d", v, formatV1)
	}
	r := &Record{Op: Op(d.byte())}
	if d.err == nil && (r.Op == OpInvalid || r.Op >= opMax) {
		return nil, fmt.Errorf("unknown op %d", r.Op)
	}
	r.Seq = d.uint()
	r.Time = d.int()
	r.Pid = d.uint32()
	r.Comm = d.string()
	last := 0
	for d.err == nil && len(d.b) > 0 {
		tag := int(d.byte())
		if tag <= last || tag >= tagMax {
			return nil, fmt.Errorf("field tag %d after tag %d at byte %d", tag, last, d.off-1)
		}
		last = tag
		d.field(r, tag)
	}
	if d.err != nil {
		return nil, d.err
	}
	return r, nil
}

// field decodes the value of one tagged field into r.
func (d *decoder) field(r *Record, tag int) {
	switch tag {
	case tagParent:
		r.Parent = d.nonzero()
	case tagName:
		r.Name = d.nonempty()
	case tagNewParent:
		r.NewParent = d.nonzero()
	case tagNewName:
		r.NewName = d.nonempty()
	case tagIno:
		r.Ino = d.nonzero()
	case tagMode:
		r.Mode = d.nonzero32()
	case tagUid:
		r.Uid = d.nonzero32()
	case tagGid:
		r.Gid = d.nonzero32()
	case tagRdev:
		r.Rdev = d.nonzero32()
	case tagFlags:
		r.Flags = d.nonzero32()
	case tagTarget:
		r.Target = d.nonempty()
	case tagSize:
		r.Size = d.nonzero()
	case tagKind:
		if v := d.nonzero(); v > math.MaxUint8 {
			d.fail("kind %d out of range", v)
		} else {
			r.Kind = uint8(v)
		}
	case tagChunks:
		n := d.count(1 + len(cas.Hash{}))
		r.Chunks = make([]Chunk, n)
		for i := range r.Chunks {
			r.Chunks[i].Index = d.uint()
			r.Chunks[i].Hash = d.hash()
		}
	case tagValid:
		r.Valid = d.nonzero32()
	case tagAtime:
		r.Atime = d.nonzeroInt()
	case tagMtime:
		r.Mtime = d.nonzeroInt()
	case tagXName:
		r.XName = d.nonempty()
	case tagXValue:
		r.XValue = []byte(d.nonempty())
	case tagGenKind:
		r.GenKind = d.nonempty()
	case tagLabel:
		r.Label = d.nonempty()
	case tagRoot:
		if r.Root = d.hash(); r.Root.IsZero() {
			d.fail("zero root written")
		}
	case tagNextIno:
		r.NextIno = d.nonzero()
	case tagResetTo:
		r.ResetTo = d.nonzero()
	case tagSupersedes:
		r.Supersedes = d.nonzero()
	case tagAgents:
		n := d.count(1 + len(cas.Hash{}))
		r.Agents = make([]AgentRef, n)
		for i := range r.Agents {
			r.Agents[i].Name = d.string()
			r.Agents[i].State = d.hash()
		}
	case tagHoles:
		d.holes(r)
	case tagRun:
		r.Run = d.nonempty()
	case tagAgent:
		r.Agent = d.nonempty()
	}
}

// holes decodes the hole ranges. Only the canonical form is accepted:
// every range but the first starts past the previous one's end (adjacent
// ranges would be one range) and none is empty or wraps.
func (d *decoder) holes(r *Record) {
	n := d.count(2)
	r.Holes = make([]HoleRange, n)
	end := uint64(0)
	for i := range r.Holes {
		gap, count := d.uint(), d.nonzero()
		if d.err != nil {
			return
		}
		if i > 0 && gap == 0 {
			d.fail("hole range %d adjacent to the previous one", i)
			return
		}
		start := end + gap
		if start < end || start+count < start {
			d.fail("hole range %d overflows", i)
			return
		}
		r.Holes[i] = HoleRange{Start: start, Count: count}
		end = start + count
	}
}

// decoder reads from b; the first error sticks and every later read returns
// zero, so callers check d.err once.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%s at byte %d", fmt.Sprintf(format, args...), d.off)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	d.off++
	return v
}

func (d *decoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	switch {
	case n == 0:
		d.fail("truncated varint")
		return 0
	case n < 0:
		d.fail("varint overflows 64 bits")
		return 0
	case n != uvarintLen(v):
		d.fail("non-minimal varint")
		return 0
	}
	d.b = d.b[n:]
	d.off += n
	return v
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func (d *decoder) int() int64 {
	u := d.uint()
	return int64(u>>1) ^ -int64(u&1) // zigzag, as binary.AppendVarint
}

func (d *decoder) uint32() uint32 {
	v := d.uint()
	if v > math.MaxUint32 {
		d.fail("value %d does not fit 32 bits", v)
		return 0
	}
	return uint32(v)
}

func (d *decoder) nonzero() uint64 {
	v := d.uint()
	if v == 0 && d.err == nil {
		d.fail("zero value written")
	}
	return v
}

func (d *decoder) nonzero32() uint32 {
	v := d.uint32()
	if v == 0 && d.err == nil {
		d.fail("zero value written")
	}
	return v
}

func (d *decoder) nonzeroInt() int64 {
	v := d.int()
	if v == 0 && d.err == nil {
		d.fail("zero value written")
	}
	return v
}

// count reads an element count and checks that the remaining input could
// hold that many elements of at least min bytes each.
func (d *decoder) count(min int) int {
	n := d.uint()
	if d.err != nil {
		return 0
	}
	if n == 0 {
		d.fail("empty list written")
		return 0
	}
	if n > uint64(len(d.b)/min) {
		d.fail("list of %d entries in %d bytes", n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	n := d.uint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail("length %d past the end (%d bytes left)", n, len(d.b))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	d.off += int(n)
	return s
}

func (d *decoder) nonempty() string {
	s := d.string()
	if s == "" && d.err == nil {
		d.fail("empty string written")
	}
	return s
}

func (d *decoder) hash() cas.Hash {
	var h cas.Hash
	if d.err != nil {
		return h
	}
	if len(d.b) < len(h) {
		d.fail("truncated hash")
		return h
	}
	copy(h[:], d.b)
	d.b = d.b[len(h):]
	d.off += len(h)
	return h
}
