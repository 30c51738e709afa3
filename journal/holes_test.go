package journal

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// A punch-hole over a 40 GiB sparse file is a legal syscall; its record
// must be small however many chunk slots it clears (issue 8 item 13: one
// zero-hash entry per slot made it 22.9 MB, past MaxRecordSize).
func TestHolesCompact(t *testing.T) {
	const slots = (40 << 30) / (64 << 10)
	r := &Record{Seq: 7, Op: OpData, Time: 1, Ino: 5, Size: 40 << 30, Kind: DataFallocate,
		Holes: []HoleRange{{0, slots}}}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	b := Encode(r)
	if len(b) > 40 {
		t.Errorf("40 GiB punch-hole record is %d bytes, want at most 40", len(b))
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("round trip: got %+v, want %+v", got, r)
	}
}

func TestHolesEncodedLen(t *testing.T) {
	for _, r := range sampleRecords() {
		if n, want := r.EncodedLen(), len(Encode(r)); n != want {
			t.Errorf("%s seq %d: EncodedLen %d, Encode wrote %d", r.Op, r.Seq, n, want)
		}
	}
}

func TestHolesDecodeRejects(t *testing.T) {
	head := []byte{1, byte(OpData), 1, 0, 0, 0}
	cases := map[string][]byte{
		"empty range":    {tagHoles, 1, 0, 0},
		"adjacent":       {tagHoles, 2, 0, 1, 0, 1},
		"no ranges":      {tagHoles, 0},
		"wraps":          {tagHoles, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 2},
		"count too long": {tagHoles, 3, 0, 1},
	}
	for name, tail := range cases {
		b := append(append([]byte{}, head...), tail...)
		if r, err := Decode(b); err == nil {
			t.Errorf("%s: decoded %+v", name, r)
		} else if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v does not wrap ErrCorrupt", name, err)
		}
	}
}

func TestHolesValidate(t *testing.T) {
	bad := map[string][]HoleRange{
		"empty":    {{3, 0}},
		"wraps":    {{^uint64(0), 2}},
		"unsorted": {{10, 1}, {2, 1}},
		"overlap":  {{0, 5}, {4, 2}},
		"adjacent": {{0, 5}, {5, 2}},
	}
	for name, hs := range bad {
		r := &Record{Op: OpData, Ino: 2, Size: 1 << 40, Holes: hs}
		if err := r.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	if err := (&Record{Op: OpUnlink, Parent: 1, Name: "f", Holes: []HoleRange{{0, 1}}}).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("holes on an unlink: got %v, want ErrInvalid", err)
	}
}

// Validate refuses an oversized record with ErrTooLarge (which is also
// ErrInvalid) before anything is applied, and Enqueue never takes one.
func TestValidateSize(t *testing.T) {
	big := &Record{Op: OpSetxattr, Ino: 2, XName: "user.x", XValue: []byte(strings.Repeat("x", MaxRecordSize))}
	err := big.Validate()
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("oversized record: got %v, want ErrTooLarge wrapping ErrInvalid", err)
	}
	chunks := make([]Chunk, MaxRecordSize/32)
	for i := range chunks {
		chunks[i] = Chunk{Index: uint64(i), Hash: hashOf("c")}
	}
	if err := (&Record{Op: OpData, Ino: 2, Size: 1 << 40, Chunks: chunks}).Validate(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("record of %d chunks: got %v, want ErrTooLarge", len(chunks), err)
	}
	ok := &Record{Op: OpSetxattr, Ino: 2, XName: "user.x", XValue: []byte(strings.Repeat("x", 64<<10))}
	if err := ok.Validate(); err != nil {
		t.Errorf("64 KiB xattr (the kernel's limit): %v", err)
	}
}
