package tree

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

const cs = cas.ChunkSize

// newFile returns a tree holding one empty regular file, inode 2.
func newFile(t testing.TB) (*Tree, *cas.Memory, *Node) {
	t.Helper()
	tr, s := newTestTree(t)
	mustApply(t, tr, rCreate(RootIno, "f", 2))
	return tr, s, tr.Node(2)
}

// checkContent compares the whole file and a read past its end with the model.
func checkContent(t *testing.T, tr *Tree, n *Node, model []byte, desc string) {
	t.Helper()
	if n.Size != uint64(len(model)) {
		t.Fatalf("%s: size %d, model %d", desc, n.Size, len(model))
	}
	got := make([]byte, len(model)+100)
	k, err := tr.ReadAt(n, got, 0)
	if err != nil || k != len(model) {
		t.Fatalf("%s: ReadAt whole file: %d, %v; want %d", desc, k, err, len(model))
	}
	if i := firstDiff(got[:k], model); i >= 0 {
		t.Fatalf("%s: byte %d (chunk %d +%d) is %#x, model %#x", desc, i, i/cs, i%cs, got[i], model[i])
	}
	if k, err := tr.ReadAt(n, got[:10], uint64(len(model))+uint64(len(model)%7)); k != 0 || err != nil {
		t.Fatalf("%s: read past EOF: %d, %v", desc, k, err)
	}
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// checkChunks checks the committed chunk list against the model once
// nothing is pending: all-zero slots are holes, a stored chunk is never
// longer than its slot and its bytes (then zeros) are the slot's.
func checkChunks(t *testing.T, tr *Tree, s cas.Store, n *Node, model []byte, desc string) {
	t.Helper()
	count := chunkCount(uint64(len(model)))
	if uint64(len(n.chunks)) != count {
		t.Fatalf("%s: %d chunks for size %d", desc, len(n.chunks), len(model))
	}
	holes := uint64(0)
	for i, h := range n.chunks {
		slot := model[uint64(i)*cs : uint64(i)*cs+chunkLen(uint64(len(model)), uint64(i))]
		if h.IsZero() {
			holes++
			if !allZero(slot) {
				t.Fatalf("%s: chunk %d is a hole but the model has data", desc, i)
			}
			continue
		}
		if allZero(slot) {
			t.Fatalf("%s: all-zero chunk %d stored as %s, want a hole", desc, i, h.Short())
		}
		data, err := s.Get(h)
		if err != nil {
			t.Fatalf("%s: chunk %d: %v", desc, i, err)
		}
		if len(data) > len(slot) {
			t.Fatalf("%s: chunk %d stores %d bytes, slot is %d", desc, i, len(data), len(slot))
		}
		if !bytes.Equal(data, slot[:len(data)]) || !allZero(slot[len(data):]) {
			t.Fatalf("%s: chunk %d content differs from the model", desc, i)
		}
	}
	if holes != n.holes {
		t.Fatalf("%s: holes counter %d, chunk list has %d", desc, n.holes, holes)
	}
	if want := (uint64(len(model)) - min(uint64(len(model)), holes*cs) + 511) / 512; n.Blocks() != want {
		t.Fatalf("%s: blocks %d, want %d", desc, n.Blocks(), want)
	}
}

// TestContentModel runs random WriteAt/Truncate/ZeroRange/Flush sequences
// around the chunk boundaries against a []byte model. In "live" discipline
// every size change is flushed at once, as Live.SetAttr does; in "any"
// discipline operations pile up in the pending buffers between flushes, as
// the Tree API allows.
func TestContentModel(t *testing.T) {
	for _, disc := range []string{"live", "any"} {
		t.Run(disc, func(t *testing.T) {
			seeds := uint64(12)
			if raceEnabled {
				seeds = 4
			}
			for seed := uint64(1); seed <= seeds; seed++ {
				runContentModel(t, seed, disc == "live", 250)
			}
		})
	}
}

func runContentModel(t *testing.T, seed uint64, flushTruncate bool, steps int) {
	rng := rand.New(rand.NewPCG(seed, 42))
	tr, s, n := newFile(t)
	var model []byte
	now := int64(100)
	// off returns an offset near a chunk boundary in the first 6 chunks.
	off := func() uint64 {
		base := uint64(rng.IntN(6)) * cs
		switch rng.IntN(5) {
		case 0:
			return base
		case 1:
			return base + 1
		case 2:
			return base + cs - 1
		case 3:
			return base + cs - 2
		}
		return base + uint64(rng.IntN(cs))
	}
	length := func() uint64 {
		switch rng.IntN(4) {
		case 0:
			return uint64(rng.IntN(3))
		case 1:
			return cs
		case 2:
			return uint64(rng.IntN(3 * cs))
		}
		return uint64(rng.IntN(100))
	}
	var trace []string
	for step := range steps {
		now++
		var op string
		switch k := rng.IntN(10); {
		case k < 4:
			o, l := off(), max(length(), 1) // a zero-length write is TestWriteAtEmpty's
			p := make([]byte, l)
			fill := byte(rng.IntN(4)) // 0: a write of zeros
			for i := range p {
				p[i] = fill * byte(1+i%7)
			}
			op = fmt.Sprintf("WriteAt(off %d, len %d, fill %d)", o, l, fill)
			if err := tr.WriteAt(n, p, o, now); err != nil {
				t.Fatalf("seed %d step %d %s: %v", seed, step, op, err)
			}
			if end := o + l; end > uint64(len(model)) {
				model = append(model, make([]byte, end-uint64(len(model)))...)
			}
			copy(model[o:], p)
		case k < 6:
			size := off()
			if rng.IntN(3) == 0 {
				size = uint64(len(model)) / 2
			}
			op = fmt.Sprintf("Truncate(%d)", size)
			if err := tr.Truncate(n, size, now); err != nil {
				t.Fatalf("seed %d step %d %s: %v", seed, step, op, err)
			}
			if size < uint64(len(model)) {
				model = model[:size]
			} else {
				model = append(model, make([]byte, size-uint64(len(model)))...)
			}
			if flushTruncate {
				flushApply(t, tr, s, n)
				op += "+Flush"
			}
		case k < 7:
			o, l := off(), length()
			if rng.IntN(3) == 0 {
				l = cs * uint64(1+rng.IntN(3))
				o -= o % cs
			}
			op = fmt.Sprintf("ZeroRange(off %d, len %d)", o, l)
			if err := tr.ZeroRange(n, o, l, now); err != nil {
				t.Fatalf("seed %d step %d %s: %v", seed, step, op, err)
			}
			for i := o; i < min(o+l, uint64(len(model))); i++ {
				model[i] = 0
			}
		default:
			op = "Flush+Apply"
			flushApply(t, tr, s, n)
			if err := tr.Check(); err != nil {
				t.Fatalf("seed %d step %d: Check: %v", seed, step, err)
			}
		}
		trace = append(trace, op)
		desc := fmt.Sprintf("seed %d step %d after %v", seed, step, trace[max(0, len(trace)-6):])
		checkContent(t, tr, n, model, desc)
		if op == "Flush+Apply" || flushTruncate && op[0] == 'T' {
			checkChunks(t, tr, s, n, model, desc)
		}
	}
	flushApply(t, tr, s, n)
	checkContent(t, tr, n, model, fmt.Sprintf("seed %d final", seed))
	checkChunks(t, tr, s, n, model, fmt.Sprintf("seed %d final", seed))
}

// TestContentTruncateDownUp: truncating into a chunk and growing the file
// again reads zeros past the cut, with a flush in between (Live's way).
func TestContentTruncateDownUp(t *testing.T) {
	tr, s, n := newFile(t)
	data := bytes.Repeat([]byte{0xAA}, 3*cs)
	if err := tr.WriteAt(n, data, 0, 1); err != nil {
		t.Fatal(err)
	}
	flushApply(t, tr, s, n)
	if err := tr.Truncate(n, 10, 2); err != nil {
		t.Fatal(err)
	}
	flushApply(t, tr, s, n)
	if err := tr.Truncate(n, 3*cs, 3); err != nil {
		t.Fatal(err)
	}
	model := append(bytes.Repeat([]byte{0xAA}, 10), make([]byte, 3*cs-10)...)
	checkContent(t, tr, n, model, "truncate 10, flush, grow")
	flushApply(t, tr, s, n)
	checkContent(t, tr, n, model, "after flush")
	checkChunks(t, tr, s, n, model, "after flush")
}

// TestContentTruncateDownUpUnflushed is the same without the flush between
// the two truncates: the Tree API allows it, and the content doc promises
// "growing the file again shows zeros, not old bytes".
func TestContentTruncateDownUpUnflushed(t *testing.T) {
	tr, s, n := newFile(t)
	if err := tr.WriteAt(n, bytes.Repeat([]byte{0xAA}, 3*cs), 0, 1); err != nil {
		t.Fatal(err)
	}
	flushApply(t, tr, s, n)
	if err := tr.Truncate(n, 10, 2); err != nil {
		t.Fatal(err)
	}
	if err := tr.Truncate(n, 3*cs, 3); err != nil {
		t.Fatal(err)
	}
	model := append(bytes.Repeat([]byte{0xAA}, 10), make([]byte, 3*cs-10)...)
	checkContent(t, tr, n, model, "truncate 10 then 3 chunks, before flush")
	flushApply(t, tr, s, n)
	checkContent(t, tr, n, model, "after flush")
}

// TestContentHoles: all-zero chunks are stored as the zero hash, whether
// written as zeros, punched or zeroed, and journaled as hole ranges.
func TestContentHoles(t *testing.T) {
	tr, s, n := newFile(t)
	if err := tr.WriteAt(n, make([]byte, 2*cs), 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := tr.WriteAt(n, []byte("x"), 3*cs, 1); err != nil {
		t.Fatal(err)
	}
	r := flushApply(t, tr, s, n)
	if len(r.Chunks) != 1 || r.Chunks[0].Index != 3 || len(r.Holes) != 1 || r.Holes[0] != (journal.HoleRange{Start: 0, Count: 2}) {
		t.Fatalf("record chunks %+v holes %+v, want chunk 3 and one hole range 0-1", r.Chunks, r.Holes)
	}
	ch := n.ChunkHashes()
	if len(ch) != 4 || !ch[0].IsZero() || !ch[1].IsZero() || !ch[2].IsZero() || ch[3].IsZero() {
		t.Fatalf("chunks %v", ch)
	}
	if n.Blocks() != 1 {
		t.Errorf("blocks %d, want 1", n.Blocks())
	}
	// Punch the data chunk: the file is all holes again.
	if err := tr.ZeroRange(n, 3*cs, cs, 2); err != nil {
		t.Fatal(err)
	}
	flushApply(t, tr, s, n)
	for i, h := range n.ChunkHashes() {
		if !h.IsZero() {
			t.Errorf("chunk %d not a hole after punch", i)
		}
	}
	if n.Blocks() != 0 || n.Size != 3*cs+1 {
		t.Errorf("blocks %d size %d", n.Blocks(), n.Size)
	}
	// Zeroing part of a chunk keeps it; zeroing the rest makes it a hole.
	if err := tr.WriteAt(n, bytes.Repeat([]byte{1}, 100), 10, 3); err != nil {
		t.Fatal(err)
	}
	flushApply(t, tr, s, n)
	if err := tr.ZeroRange(n, 0, 50, 4); err != nil {
		t.Fatal(err)
	}
	flushApply(t, tr, s, n)
	if n.ChunkHashes()[0].IsZero() {
		t.Fatal("partly zeroed chunk became a hole")
	}
	if err := tr.ZeroRange(n, 50, 100, 5); err != nil {
		t.Fatal(err)
	}
	flushApply(t, tr, s, n)
	if !n.ChunkHashes()[0].IsZero() {
		t.Fatal("fully zeroed chunk is not a hole")
	}
}

// TestContentSparseLarge: a file far past 4 GiB costs memory for what was
// written, not for its size, and offsets past 32 bits work.
func TestContentSparseLarge(t *testing.T) {
	tr, s, n := newFile(t)
	const at = 5 << 30
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := tr.WriteAt(n, []byte{7}, at, 1); err != nil {
		t.Fatal(err)
	}
	// Across the 4 GiB line, too.
	if err := tr.WriteAt(n, []byte{1, 2, 3, 4}, 4<<30-2, 1); err != nil {
		t.Fatal(err)
	}
	r := flushApply(t, tr, s, n)
	root := storeRoot(t, tr, s)
	runtime.ReadMemStats(&after)
	// The chunk list is dense (32 bytes per 64 KiB slot: 2.5 MiB here, in
	// the tree, the record's apply and the encoded inode object).
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("writing 5 bytes at 5 GiB allocated %d MiB", alloc>>20)
	}
	if n.Size != at+1 || len(r.Chunks) != 3 {
		t.Fatalf("size %d, record chunks %d", n.Size, len(r.Chunks))
	}
	buf := make([]byte, 8)
	for _, c := range []struct {
		off  uint64
		want []byte
		n    int
	}{
		{0, make([]byte, 8), 8},
		{4<<30 - 4, []byte{0, 0, 1, 2, 3, 4, 0, 0}, 8},
		{at - 7, []byte{0, 0, 0, 0, 0, 0, 0, 7}, 8},
		{at - 3, []byte{0, 0, 0, 7}, 4},
		{at + 1, nil, 0},
		{at + 1<<30, nil, 0},
	} {
		k, err := tr.ReadAt(n, buf, c.off)
		if err != nil || k != c.n || !bytes.Equal(buf[:k], c.want) {
			t.Errorf("ReadAt(%d) = %d %v %v, want %d %v", c.off, k, err, buf[:k], c.n, c.want)
		}
	}
	// Blocks count the file's size less its holes: two whole data chunks
	// and the one byte at 5 GiB (rounded up to a sector).
	if b := n.Blocks(); b != (2*cs+1+511)/512 {
		t.Errorf("blocks %d, want %d (two data chunks and one byte)", b, (2*cs+1+511)/512)
	}
	loaded, err := Load(s, root)
	if err != nil {
		t.Fatal(err)
	}
	if ln := loaded.Node(2); ln.Size != at+1 || ln.Blocks() != n.Blocks() {
		t.Errorf("loaded size %d blocks %d", ln.Size, ln.Blocks())
	}
}

// TestContentLimits: the size limit and non-regular files.
func TestContentLimits(t *testing.T) {
	tr, _, n := newFile(t)
	if err := tr.WriteAt(n, []byte{1}, MaxFileSize, 1); err != ErrFileTooBig {
		t.Errorf("write at MaxFileSize: %v", err)
	}
	if err := tr.WriteAt(n, []byte{1, 2}, ^uint64(0), 1); err != ErrFileTooBig {
		t.Errorf("write wrapping around: %v", err)
	}
	if err := tr.Truncate(n, MaxFileSize+1, 1); err != ErrFileTooBig {
		t.Errorf("truncate past MaxFileSize: %v", err)
	}
	if n.Size != 0 {
		t.Errorf("size %d after refused ops", n.Size)
	}
	mustApply(t, tr, rMkdir(RootIno, "d", 3), rSymlink(RootIno, "s", 4, "x"))
	for _, ino := range []uint64{3, 4} {
		o := tr.Node(ino)
		if _, err := tr.ReadAt(o, make([]byte, 1), 0); err != ErrInvalid {
			t.Errorf("ReadAt of inode %d: %v", ino, err)
		}
		if err := tr.WriteAt(o, []byte{1}, 0, 1); err != ErrInvalid {
			t.Errorf("WriteAt of inode %d: %v", ino, err)
		}
		if err := tr.Truncate(o, 0, 1); err != ErrInvalid {
			t.Errorf("Truncate of inode %d: %v", ino, err)
		}
		if err := tr.ZeroRange(o, 0, 1, 1); err != ErrInvalid {
			t.Errorf("ZeroRange of inode %d: %v", ino, err)
		}
	}
}

// TestWriteAtEmpty: a zero-length write has no effect (write(2): "If count
// is zero ... 0 is returned without causing any other effect"); in
// particular it does not move the end of the file.
func TestWriteAtEmpty(t *testing.T) {
	tr, _, n := newFile(t)
	if err := tr.WriteAt(n, nil, 1000, 5); err != nil {
		t.Fatal(err)
	}
	if n.Size != 0 {
		t.Errorf("size %d after a zero-length write at 1000, want 0", n.Size)
	}
	if n.Size != 0 && !n.Dirty() {
		t.Errorf("and the size change is not pending either: Flush will never journal it")
	}
}

// TestFlushRecord: Flush makes one record with the changed chunk slots in
// order and blobs that hash to their names; Dirty and PendingBytes follow.
func TestFlushRecord(t *testing.T) {
	tr, s, n := newFile(t)
	if n.Dirty() {
		t.Fatal("new file dirty")
	}
	_ = tr.WriteAt(n, []byte("hello"), 2*cs+5, 7)
	_ = tr.WriteAt(n, []byte("x"), 0, 8)
	if !n.Dirty() || n.PendingBytes() != 2*minSlotBytes { // small buffers count minSlotBytes, not a chunk each
		t.Fatalf("dirty %v pending %d", n.Dirty(), n.PendingBytes())
	}
	r, blobs := tr.Flush(n, journal.DataWrite)
	if r.Op != journal.OpData || r.Ino != 2 || r.Size != 2*cs+10 || r.Mtime != 8 {
		t.Fatalf("record %+v", r)
	}
	if len(r.Chunks) != 2 || r.Chunks[0].Index != 0 || r.Chunks[1].Index != 2 {
		t.Fatalf("chunks %+v", r.Chunks)
	}
	for _, b := range blobs {
		if cas.Sum(b.Data) != b.Hash {
			t.Fatal("blob does not hash to its name")
		}
	}
	if len(blobs[1].Data) != 10 {
		t.Errorf("last chunk blob %d bytes, want 10", len(blobs[1].Data))
	}
	for _, b := range blobs {
		_, _ = s.Put(b.Data)
	}
	r.Time = 9
	mustApply(t, tr, r)
	n.ClearPending()
	if n.Dirty() || n.PendingBytes() != 0 {
		t.Fatal("still dirty after ClearPending")
	}
	got := make([]byte, 5)
	if k, _ := tr.ReadAt(n, got, 2*cs+5); k != 5 || string(got) != "hello" {
		t.Errorf("read back %q", got[:k])
	}
}
