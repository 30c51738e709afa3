package tree

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// TestSmallWritesStoreDeltas: a 4 KiB write into a stored chunk (a
// random writer) and a 4 KiB append to a partial one (fio's write +
// fsync) each add a few KiB to the log, not the whole 64 KiB chunk again,
// and the file reads back as written, live and after replay. Before
// chunks named their base, each fsync here logged the whole chunk.
func TestSmallWritesStoreDeltas(t *testing.T) {
	l, j := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 2))
	random := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	model := random(4 * cas.ChunkSize)
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, model, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	const rounds = 24
	before := j.Objects().LogBytes()
	for i := range rounds {
		p := random(4096)
		off := uint64(rng.IntN(len(model)/4096)) * 4096
		if i%2 == 1 { // an append
			off = uint64(len(model))
			model = append(model, p...)
		} else {
			copy(model[off:], p)
		}
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, p, off, false); err != nil {
			t.Fatal(err)
		}
		if err := l.Fsync(testCaller, st.Ino); err != nil {
			t.Fatal(err)
		}
	}
	grew := j.Objects().LogBytes() - before
	// A delta of 4 KiB plus its frame and entries; a whole chunk would be
	// 16 times that.
	if per := grew / rounds; per > 8<<10 {
		t.Errorf("each 4 KiB write + fsync logged %d bytes", per)
	} else {
		t.Logf("each 4 KiB write + fsync logged %d bytes", per)
	}
	check := func(what string, tr *Tree) {
		t.Helper()
		n := tr.nodes[st.Ino]
		got := make([]byte, len(model)+10)
		k, err := tr.ReadAt(n, got, 0)
		if err != nil || !bytes.Equal(got[:k], model) {
			t.Fatalf("%s: read %d bytes (%v), differs from what was written", what, k, err)
		}
	}
	l.mu.RLock()
	check("live", l.t)
	l.mu.RUnlock()
	check("replay", replay(t, j))
}

// TestWholeChunkWriteNamesNoBase: a slot overwritten whole after a
// read-modify-write started in it no longer names the old chunk as its
// base (a delta against unrelated bytes is only work for the committer),
// and one that was only patched names the chunk it was read from.
func TestWholeChunkWriteNamesNoBase(t *testing.T) {
	l, _ := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 2*cas.ChunkSize/16)
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, data, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	l.mu.RLock()
	old := append([]cas.Hash(nil), l.t.nodes[st.Ino].chunks...)
	l.mu.RUnlock()
	for _, w := range []struct {
		off uint64
		n   int
	}{{10, 100}, {cas.ChunkSize + 10, 100}, {cas.ChunkSize, cas.ChunkSize}} {
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, bytes.Repeat([]byte{'x'}, w.n), w.off, false); err != nil {
			t.Fatal(err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r, blobs := l.t.Flush(l.t.nodes[st.Ino], journal.DataWrite)
	if len(blobs) != 2 || len(r.Chunks) != 2 {
		t.Fatalf("flush: %d blobs, %d chunks", len(blobs), len(r.Chunks))
	}
	if blobs[0].Base != old[0] || !bytes.Equal(blobs[0].BaseData, data[:cas.ChunkSize]) {
		t.Errorf("patched chunk 0: base %s with %d bytes, want %s", blobs[0].Base.Short(), len(blobs[0].BaseData), old[0].Short())
	}
	if !blobs[1].Base.IsZero() || blobs[1].BaseData != nil {
		t.Errorf("chunk 1, overwritten whole: names base %s", blobs[1].Base.Short())
	}
}

// TestWholeChunksJudgesLikeIncompressible: the chunks of one write are
// judged on the quick sample only after the first one looked random; a
// text chunk among random ones is still found compressible, and every
// hash is the hash of its chunk.
func TestWholeChunksJudgesLikeIncompressible(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	random := make([]byte, cas.ChunkSize)
	text := bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog\n"), cas.ChunkSize/44+1)[:cas.ChunkSize]
	for _, kinds := range []string{"rrrrrrrr", "rrtrrzrt", "trrrtr", "zrrr", "t"} {
		var p []byte
		for _, k := range kinds {
			for i := range random {
				random[i] = byte(rng.Uint32())
			}
			switch k {
			case 'r':
				p = append(p, random...)
			case 't':
				p = append(p, text...)
			case 'z':
				p = append(p, make([]byte, cas.ChunkSize)...)
			}
		}
		bufs, sums := WholeChunks(p, 0)
		if len(bufs) != len(kinds) {
			t.Fatalf("%s: %d chunks", kinds, len(bufs))
		}
		for i, b := range bufs {
			if kinds[i] == 'z' {
				if !sums[i].Hash.IsZero() {
					t.Errorf("%s: chunk %d of zeros has a hash", kinds, i)
				}
				continue
			}
			if sums[i].Hash != cas.Sum(b) || !bytes.Equal(b, p[i*cas.ChunkSize:(i+1)*cas.ChunkSize]) {
				t.Fatalf("%s: chunk %d: wrong copy or hash", kinds, i)
			}
			if want := kinds[i] == 'r'; sums[i].Raw != want {
				t.Errorf("%s: chunk %d: Raw %v", kinds, i, sums[i].Raw)
			}
		}
	}
}

// TestRewriteAfterTruncateStoresDelta: a small file rewritten whole
// (open with O_TRUNC: a truncation to 0, then the new bytes) is stored as
// a delta against the chunk the truncation cut, not whole again, and
// reads back as written, live and after replay. Before the tree remembered cut chunks, each
// rewrite logged the whole file.
func TestRewriteAfterTruncateStoresDelta(t *testing.T) {
	l, j := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 3))
	model := make([]byte, 6000) // random: zstd cannot shrink it, a delta can
	for i := range model {
		model[i] = byte(rng.Uint32())
	}
	write := func() {
		t.Helper()
		if _, err := l.SetAttr(testCaller, st.Ino, SetAttrIn{Valid: SetSize, Size: 0}); err != nil {
			t.Fatal(err)
		}
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, model, 0, false); err != nil {
			t.Fatal(err)
		}
		if err := l.Fsync(testCaller, st.Ino); err != nil {
			t.Fatal(err)
		}
	}
	write()
	const rounds = 24 // past MaxDataChain: some versions are stored whole
	before := j.Objects().LogBytes()
	for i := range rounds {
		copy(model[rng.IntN(len(model)-16):], []byte("version "+string(rune('A'+i))))
		write()
	}
	grew := j.Objects().LogBytes() - before
	// Whole, each version would take its 6000 bytes; as deltas a few
	// dozen, and one in MaxDataChain+1 whole.
	if limit := int64(rounds*6000/cas.MaxDataChain + rounds*300); grew > limit {
		t.Errorf("%d rewrites logged %d bytes, want at most %d", rounds, grew, limit)
	} else {
		t.Logf("%d rewrites logged %d bytes", rounds, grew)
	}
	check := func(what string, tr *Tree) {
		t.Helper()
		n := tr.nodes[st.Ino]
		got := make([]byte, len(model)+10)
		k, err := tr.ReadAt(n, got, 0)
		if err != nil || !bytes.Equal(got[:k], model) {
			t.Fatalf("%s: read %d bytes (%v), differs from what was written", what, k, err)
		}
	}
	l.mu.RLock()
	check("live", l.t)
	l.mu.RUnlock()
	check("replay", replay(t, j))
}

// TestTruncateToZeroJoinsTheWrite: a truncation to 0 (open with O_TRUNC)
// stays pending, so the rewrite after it is one OpData record, not a
// truncation record and a write record; a truncation to 0 with nothing
// written after it is journaled at the flush as a truncation. Both read
// back after replay. Before, SetAttr journaled every truncation at once.
func TestTruncateToZeroJoinsTheWrite(t *testing.T) {
	l, j := newTestLive(t)
	var inos []uint64
	for _, name := range []string{"rewritten", "emptied"} {
		st, err := l.Create(testCaller, RootIno, name, syscall.S_IFREG|0o644, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, []byte("first version\n"), 0, false); err != nil {
			t.Fatal(err)
		}
		if err := l.Fsync(testCaller, st.Ino); err != nil {
			t.Fatal(err)
		}
		inos = append(inos, st.Ino)
	}
	from := j.Head() + 1
	for _, ino := range inos {
		if _, err := l.SetAttr(testCaller, ino, SetAttrIn{Valid: SetSize, Size: 0}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.WriteAt(testCaller, inos[0], NoHandle, []byte("second\n"), 0, false); err != nil {
		t.Fatal(err)
	}
	for _, ino := range inos {
		if err := l.Fsync(testCaller, ino); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	_ = j.Iter(from, func(r *journal.Record) error {
		got = append(got, fmt.Sprintf("%s ino %d size %d kind %d chunks %d", r.Op, r.Ino, r.Size, r.Kind, len(r.Chunks)))
		return nil
	})
	want := []string{
		fmt.Sprintf("%s ino %d size 7 kind %d chunks 1", journal.OpData, inos[0], journal.DataWrite),
		fmt.Sprintf("%s ino %d size 0 kind %d chunks 0", journal.OpData, inos[1], journal.DataTruncate),
	}
	if !slices.Equal(got, want) {
		t.Errorf("records after the truncations:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	tr := replay(t, j)
	buf := make([]byte, 64)
	for i, want := range []string{"second\n", ""} {
		k, err := tr.ReadAt(tr.nodes[inos[i]], buf, 0)
		if err != nil || string(buf[:k]) != want {
			t.Errorf("inode %d after replay: %q (%v), want %q", inos[i], buf[:k], err, want)
		}
	}
}

// Flush names the pages a read-modify-write changed (Blob.Pages), so the
// store compares only those against the base: a write across a page
// boundary, a zeroed range, and a truncation into a chunk (all pages).
func TestFlushNamesChangedPages(t *testing.T) {
	l, _ := newTestLive(t)
	st, err := l.Create(testCaller, RootIno, "f", syscall.S_IFREG|0o644, 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	model := make([]byte, 3*cas.ChunkSize)
	for i := range model {
		model[i] = byte(rng.Uint32())
	}
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, model, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := l.Fsync(testCaller, st.Ino); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteAt(testCaller, st.Ino, NoHandle, bytes.Repeat([]byte{1}, 4096), 2*4096+100, false); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.t.nodes[st.Ino]
	if err := l.t.ZeroRange(n, cas.ChunkSize+5*4096+7, 10, 1); err != nil {
		t.Fatal(err)
	}
	if err := l.t.Truncate(n, 2*cas.ChunkSize+100, 1); err != nil {
		t.Fatal(err)
	}
	_, blobs := l.t.Flush(n, journal.DataWrite)
	want := []uint64{1<<2 | 1<<3, 1 << 5, 1<<16 - 1}
	if len(blobs) != len(want) {
		t.Fatalf("%d blobs, want %d", len(blobs), len(want))
	}
	for i, bl := range blobs {
		if bl.BaseData == nil || bl.Pages != want[i] {
			t.Errorf("chunk %d: pages %b (base %v), want %b", i, bl.Pages, bl.BaseData != nil, want[i])
		}
	}
}
