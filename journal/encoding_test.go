package journal

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/reynfs/reynfs/cas"
)

func hashOf(s string) cas.Hash {
	var h cas.Hash
	copy(h[:], s)
	h[31] = 0xa5
	return h
}

// sampleRecords returns one realistic record per op (every op appears).
func sampleRecords() []*Record {
	const t = 1781300000123456789
	return []*Record{
		{Seq: 1, Op: OpCreate, Time: t, Pid: 4242, Comm: "go", Parent: 1, Name: "main.go", Ino: 17, Mode: 0o100644, Uid: 1000, Gid: 1000},
		{Seq: 2, Op: OpCreate, Time: t, Pid: 9, Comm: "mkfifo", Parent: 1, Name: "pipe", Ino: 18, Mode: 0o010600, Uid: 1000, Gid: 1000},
		{Seq: 3, Op: OpCreate, Time: t, Comm: "mknod", Parent: 1, Name: "null", Ino: 19, Mode: 0o020666, Rdev: 0x0103},
		{Seq: 4, Op: OpMkdir, Time: t, Pid: 77, Comm: "mkdir", Parent: 1, Name: "internal", Ino: 20, Mode: 0o40755, Uid: 1000, Gid: 1000},
		{Seq: 5, Op: OpSymlink, Time: t, Pid: 77, Comm: "ln", Parent: 20, Name: "link", Ino: 21, Target: "../main.go", Uid: 1000, Gid: 1000},
		{Seq: 6, Op: OpLink, Time: t, Pid: 77, Comm: "ln", Parent: 20, Name: "hard", Ino: 17},
		{Seq: 7, Op: OpUnlink, Time: t, Pid: 77, Comm: "rm", Parent: 20, Name: "hard"},
		{Seq: 8, Op: OpRmdir, Time: t, Pid: 77, Comm: "rmdir", Parent: 1, Name: "empty"},
		{Seq: 9, Op: OpRename, Time: t, Pid: 5, Comm: "vim", Parent: 1, Name: ".main.go.swp", NewParent: 20, NewName: "main.go", Flags: RenameNoreplace},
		{Seq: 10, Op: OpRename, Time: t, Comm: "mv", Parent: 1, Name: "a", NewParent: 1, NewName: "b", Flags: RenameExchange},
		{Seq: 11, Op: OpData, Time: t, Pid: 5, Comm: "vim", Ino: 17, Size: 200000, Kind: DataWrite,
			Chunks: []Chunk{{0, hashOf("c0")}, {1, hashOf("c1")}, {3, cas.Zero}}},
		{Seq: 12, Op: OpData, Time: t, Comm: "truncate", Ino: 17, Kind: DataTruncate},
		{Seq: 13, Op: OpSetattr, Time: t, Comm: "touch", Ino: 17, Valid: SetAtime | SetMtime, Atime: t - 1e9, Mtime: -5},
		{Seq: 14, Op: OpSetattr, Time: t, Comm: "chown", Ino: 17, Valid: SetMode | SetUid | SetGid, Mode: 0o100600, Uid: 0, Gid: 50},
		{Seq: 15, Op: OpSetxattr, Time: t, Comm: "setfattr", Ino: 17, XName: "user.note", XValue: []byte{0, 1, 2, 0xff}},
		{Seq: 16, Op: OpRemovexattr, Time: t, Comm: "setfattr", Ino: 17, XName: "user.note"},
		{Seq: 17, Op: OpGeneration, Time: t, GenKind: "turn", Label: "turn 3: add tests", Root: hashOf("root"), NextIno: 22,
			Agents: []AgentRef{{"coder", hashOf("s1")}, {"reviewer", hashOf("s2")}}},
		{Seq: 18, Op: OpReset, Time: t, Comm: "reynfs", ResetTo: 9, Supersedes: 0},
		{Seq: 19, Op: OpReset, Time: t, Comm: "reynfs", ResetTo: 17, Supersedes: 18},
		{Seq: 20, Op: OpAgentState, Time: t, Label: "coder", Root: hashOf("s3")},
		{Seq: 21, Op: OpImport, Time: t, Root: hashOf("r2"), NextIno: 1 << 40},
		{Seq: 22, Op: OpRestore, Time: t, Parent: 7, Name: "src", Root: hashOf("r3"), Ino: 1 << 33, Label: "restore src from seq 9"},
		{Seq: 23, Op: OpData, Time: t, Comm: "fallocate", Ino: 17, Size: 40 << 30, Kind: DataFallocate, Mtime: t,
			Chunks: []Chunk{{0, hashOf("c0")}}, Holes: []HoleRange{{0, 3}, {5, 655355}}},
		{Seq: 24, Op: OpData, Time: t, Pid: 31337, Comm: "sh", Run: "a1b2c3d4e5f6", Agent: "coder", Ino: 17, Size: 2, Kind: DataWrite,
			Chunks: []Chunk{{0, hashOf("c2")}}},
		{Seq: 25, Op: OpUnlink, Time: t, Pid: 31338, Comm: "rm", Run: "a1b2c3d4e5f6", Parent: 1, Name: "f"},
	}
}

// TestDecodeWithoutRun: a record written before Run and Agent existed (these
// bytes are what Encode wrote then) decodes with both empty and re-encodes
// to the same bytes; one with them keeps them.
func TestDecodeWithoutRun(t *testing.T) {
	old := []byte{1, byte(OpUnlink), 7, 4, 0x92, 0x21, 2, 'r', 'm', tagParent, 12, tagName, 3, 'x', '.', 'o'}
	r, err := Decode(old)
	if err != nil {
		t.Fatal(err)
	}
	want := &Record{Seq: 7, Op: OpUnlink, Time: 2, Pid: 4242, Comm: "rm", Parent: 12, Name: "x.o"}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("old record decoded as %+v, want %+v", r, want)
	}
	if b := Encode(r); !bytes.Equal(b, old) {
		t.Fatalf("old record re-encoded as %x, want %x", b, old)
	}
	r.Run, r.Agent = "r1", "coder"
	b := Encode(r)
	if !bytes.Equal(b[:len(old)], old) || len(b) != len(old)+2+2+2+5 {
		t.Fatalf("run and agent not appended as two tagged fields: %x", b)
	}
	got, err := Decode(b)
	if err != nil || got.Run != "r1" || got.Agent != "coder" {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("an unlink with a run does not validate: %v", err)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	seen := map[Op]bool{}
	for _, r := range sampleRecords() {
		if err := r.Validate(); err != nil {
			t.Errorf("sample %d: %v", r.Seq, err)
		}
		seen[r.Op] = true
		b := Encode(r)
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%s seq %d: %v", r.Op, r.Seq, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("%s round trip:\n got %+v\nwant %+v", r.Op, got, r)
		}
		if b2 := Encode(got); !bytes.Equal(b, b2) {
			t.Errorf("%s: re-encoding differs", r.Op)
		}
	}
	for op := OpCreate; op < opMax; op++ {
		if !seen[op] {
			t.Errorf("no sample for %s", op)
		}
	}
}

func TestEncodeCompact(t *testing.T) {
	r := &Record{Seq: 1 << 20, Op: OpUnlink, Time: 1781300000123456789, Pid: 4242, Comm: "rm", Parent: 12, Name: "x.o"}
	if n := len(Encode(r)); n > 30 {
		t.Errorf("unlink record is %d bytes, want at most 30", n)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := Encode(sampleRecords()[0])
	cases := map[string][]byte{
		"empty":          nil,
		"version":        append([]byte{2}, good[1:]...),
		"op zero":        append([]byte{1, 0}, good[2:]...),
		"op unknown":     append([]byte{1, byte(opMax)}, good[2:]...),
		"truncated":      good[:len(good)-1],
		"trailing":       append(append([]byte{}, good...), 0),
		"tag repeat":     append(append([]byte{}, good...), tagGid, 5),
		"tag unknown":    append(append([]byte{}, good...), tagMax, 5),
		"empty run":      append(append([]byte{}, good...), tagRun, 0),
		"zero field":     {1, byte(OpUnlink), 1, 0, 0, 0, tagParent, 0},
		"long varint":    {1, byte(OpUnlink), 0x81, 0x00, 0, 0, 0},
		"absurd string":  {1, byte(OpUnlink), 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"absurd chunks":  {1, byte(OpData), 1, 0, 0, 0, tagChunks, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"pid overflow":   {1, byte(OpUnlink), 1, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 0},
		"varint too big": {1, byte(OpUnlink), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},
	}
	for name, b := range cases {
		if r, err := Decode(b); err == nil {
			t.Errorf("%s: decoded %+v", name, r)
		} else if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v does not wrap ErrCorrupt", name, err)
		}
	}
}

func TestValidate(t *testing.T) {
	bad := []*Record{
		{Op: OpInvalid},
		{Op: opMax},
		{Op: OpMkdir, Parent: 1, Name: "d", Rdev: 3},
		{Op: OpUnlink, Parent: 1, Name: "f", Chunks: []Chunk{{}}},
		{Op: OpReset, Seq: 5, ResetTo: 5},
	}
	for _, r := range bad {
		if err := r.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: got %v, want ErrInvalid", r, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(Encode(r))
	}
	f.Add([]byte{})
	f.Add([]byte{1, byte(OpData), 1, 0, 0, 0, tagChunks, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			return
		}
		b2 := Encode(r)
		if n := r.EncodedLen(); n != len(b2) {
			t.Fatalf("EncodedLen %d, Encode wrote %d bytes", n, len(b2))
		}
		r2, err := Decode(b2)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", r, r2)
		}
		if !bytes.Equal(b, b2) {
			t.Fatalf("decode accepted a non-canonical form:\n%x\n%x", b, b2)
		}
	})
}
