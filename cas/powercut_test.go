package cas

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// A power cut keeps the blocks written since the last completed fdatasync
// in any order: a frame no sync covered can be zeros or torn while a later
// one, also unsynced, is whole. These tests build such logs and check that
// the scan tells them from damage by the frames' synced-through marks.

// pcFrame is one frame a power-cut test wrote: one object.
type pcFrame struct {
	h      Hash
	data   []byte
	at     Pos
	end    int64
	synced bool // a SyncLog returned after it
}

// writeFrames puts one object per entry of syncAfter (each its own frame)
// and syncs the log after those whose entry is set.
func writeFrames(t *testing.T, dir string, syncAfter []bool) []pcFrame {
	t.Helper()
	s, db := openTestLog(t, dir)
	defer db.Close()
	defer s.CloseLog()
	var frs []pcFrame
	for _, sync := range syncAfter {
		before := s.LogEnd()
		data := noisy(before.Seg<<32|uint64(before.Off), 3000) // new for each place
		h, err := s.Put(data)
		if err != nil {
			t.Fatal(err)
		}
		after := s.LogEnd()
		at := before
		if after.Seg != before.Seg {
			at = Pos{after.Seg, segHeaderSize}
		}
		frs = append(frs, pcFrame{h: h, data: data, at: at, end: after.Off})
		if sync {
			if err := s.SyncLog(); err != nil {
				t.Fatal(err)
			}
			for k := range frs {
				frs[k].synced = true
			}
		}
	}
	return frs
}

// loseIndex leaves the index as a power cut does: as the last checkpoint
// wrote it, which covers at most the synced frames (here: exactly them).
func loseIndex(t *testing.T, dir string, frs []pcFrame) {
	t.Helper()
	n := 0
	for n < len(frs) && frs[n].synced {
		n++
	}
	loseIndexAt(t, dir, frs, n)
}

// loseIndexAt leaves the index covering the first n frames: a checkpoint
// ran after the sync of frame n-1, none after.
func loseIndexAt(t *testing.T, dir string, frs []pcFrame, n int) {
	t.Helper()
	pos := frs[0].at
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(txn *badger.Txn) error {
		for i, f := range frs {
			if i < n {
				pos = Pos{f.at.Seg, f.end}
				continue
			}
			if err := txn.Delete(logKey(f.h)); err != nil {
				return err
			}
		}
		return txn.Set(KeyLogPos, pos.encode())
	})
	if err != nil {
		t.Fatal(err)
	}
}

func segPath(dir string, n uint64) string { return filepath.Join(dir, "db.log", segName(n)) }

// patchSeg changes segment n's bytes with fn (which may return a longer or
// shorter file).
func patchSeg(t *testing.T, dir string, n uint64, fn func(b []byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(segPath(dir, n))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(segPath(dir, n), fn(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// openErr opens the store in dir writable (catch-up cuts a torn tail) and
// returns the error, or the store.
func openErr(t *testing.T, dir string) (*Badger, *badger.DB, error) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenLogged(db, filepath.Join(dir, "db.log"), LogOptions{ID: testID, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CatchUp(false); err != nil {
		_ = s.CloseLog()
		_ = db.Close()
		return nil, nil, err
	}
	return s, db, nil
}

// checkCut checks a store opened after a cut at frame cut: the frames
// before it read back, none from it on is in the index (nor is the index's
// log position past it), the log ends there, and the store takes writes
// and reopens clean.
func checkCut(t *testing.T, dir string, frs []pcFrame, cut int) {
	t.Helper()
	s, db, err := openErr(t, dir)
	if err != nil {
		t.Fatalf("open after a power cut: %v", err)
	}
	for i, f := range frs {
		ok, err := s.Has(f.h)
		if err != nil {
			t.Fatal(err)
		}
		if i >= cut {
			if ok {
				t.Errorf("frame %d, past the cut, is in the index", i)
			}
			continue
		}
		if got, err := s.Get(f.h); err != nil || !bytes.Equal(got, f.data) {
			t.Errorf("frame %d, before the cut: %v", i, err)
		}
	}
	want := frs[cut].at
	if end := s.LogEnd(); end != want {
		t.Errorf("log ends at %v after the cut, want %v", end, want)
	}
	_ = db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(KeyLogPos)
		if err != nil {
			t.Errorf("index log position: %v", err)
			return nil
		}
		v, _ := item.ValueCopy(nil)
		if p, err := decodePos(v); err != nil || posLess(want, p) {
			t.Errorf("index covers the log to %v (%v), past the cut at %v", p, err, want)
		}
		return nil
	})
	segs, err := listSegments(filepath.Join(dir, "db.log"))
	if err != nil || segs[len(segs)-1] != want.Seg {
		t.Errorf("segments %v (%v) after a cut in segment %d", segs, err, want.Seg)
	}
	h, err := s.Put(noisy(999, 2000))
	if err == nil {
		err = s.SyncLog()
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = s.CloseLog()
	_ = db.Close()
	s, db = openTestLog(t, dir)
	defer db.Close()
	defer s.CloseLog()
	if _, err := s.Get(h); err != nil {
		t.Fatalf("object written after the cut: %v", err)
	}
}

// wantDamage checks that the store in dir is refused as damaged.
func wantDamage(t *testing.T, dir string) {
	t.Helper()
	if s, db, err := openErr(t, dir); err == nil {
		_ = s.CloseLog()
		_ = db.Close()
		t.Fatal("the store opened; want damage")
	} else if !errors.Is(err, ErrDamaged) {
		t.Fatalf("open: %v, want ErrDamaged", err)
	}
}

func zeroFrame(f pcFrame) func([]byte) []byte {
	return func(b []byte) []byte { clear(b[f.at.Off:f.end]); return b }
}

// TestPowerCutOneSegment: frames A (synced), B and C (not) in one
// segment. B zeros, torn or with a garbage header while C is whole: a
// torn tail, cut at B. B synced, then zeros, with C after it: damage.
// Zeros after the last frame are the clean end; a torn last frame is cut.
func TestPowerCutOneSegment(t *testing.T) {
	flip := func(at int64) func(f pcFrame) func([]byte) []byte {
		return func(f pcFrame) func([]byte) []byte {
			return func(b []byte) []byte { b[f.at.Off+at] ^= 0x5a; return b }
		}
	}
	garbageHeader := func(f pcFrame) func([]byte) []byte {
		return func(b []byte) []byte {
			for i := range frameHeaderSize {
				b[f.at.Off+int64(i)] = byte(0xf0 + i)
			}
			return b
		}
	}
	for _, tc := range []struct {
		name  string
		hurt  func(pcFrame) func([]byte) []byte
		which int
	}{
		{"zeroed", zeroFrame, 1},
		{"bad checksum", flip(frameHeaderSize + 100), 1},
		{"garbage header", garbageHeader, 1},
		{"torn mark", flip(30), 1},
		{"torn last", func(f pcFrame) func([]byte) []byte {
			return func(b []byte) []byte { clear(b[f.at.Off+(f.end-f.at.Off)/2 : f.end]); return b }
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			frs := writeFrames(t, dir, []bool{true, false, false})
			patchSeg(t, dir, 1, tc.hurt(frs[tc.which]))
			loseIndex(t, dir, frs)
			checkCut(t, dir, frs, tc.which)
		})
	}
	t.Run("synced then zeroed", func(t *testing.T) {
		dir := t.TempDir()
		frs := writeFrames(t, dir, []bool{true, true, false})
		patchSeg(t, dir, 1, zeroFrame(frs[1]))
		loseIndexAt(t, dir, frs, 1)
		wantDamage(t, dir)
	})
	t.Run("index past the cut", func(t *testing.T) {
		// The index knew C before its position went back to before B,
		// which no write-back of Badger's WAL explains (catchdown.go):
		// B is damage.
		dir := t.TempDir()
		frs := writeFrames(t, dir, []bool{true, false, false})
		patchSeg(t, dir, 1, zeroFrame(frs[1]))
		setPos(t, dir, Pos{1, frs[0].end})
		wantDamage(t, dir)
	})
	t.Run("zeros after the last frame", func(t *testing.T) {
		dir := t.TempDir()
		frs := writeFrames(t, dir, []bool{true, false, false})
		patchSeg(t, dir, 1, func(b []byte) []byte { return append(b[:frs[2].end], make([]byte, 1<<20)...) })
		loseIndex(t, dir, frs)
		s, db, err := openErr(t, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		defer s.CloseLog()
		for i, f := range frs {
			if got, err := s.Get(f.h); err != nil || !bytes.Equal(got, f.data) {
				t.Errorf("frame %d: %v", i, err)
			}
		}
	})
}

// TestPowerCutSegments: the same across segments (a roll does not sync
// the old segment). A (segment 1) synced, B (2) and C (3) not: B zeroed
// is cut with segment 3 removed; a zero tail left in segment 2 by a lost
// truncation before an unsynced C is cut there; B synced and then zeroed
// is damage.
func TestPowerCutSegments(t *testing.T) {
	defer func(n int64) { segmentSize = n }(segmentSize)
	segmentSize = 4096 // one 3000-byte object per segment
	t.Run("zeroed", func(t *testing.T) {
		dir := t.TempDir()
		frs := writeFrames(t, dir, []bool{true, false, false})
		if frs[1].at.Seg != 2 || frs[2].at.Seg != 3 {
			t.Fatalf("frames at %v %v, want segments 2 and 3", frs[1].at, frs[2].at)
		}
		patchSeg(t, dir, 2, zeroFrame(frs[1]))
		loseIndex(t, dir, frs)
		checkCut(t, dir, frs, 1)
	})
	t.Run("garbled", func(t *testing.T) {
		dir := t.TempDir()
		frs := writeFrames(t, dir, []bool{true, false, false})
		patchSeg(t, dir, 2, func(b []byte) []byte { b[frs[1].at.Off+200] ^= 1; return b })
		loseIndex(t, dir, frs)
		checkCut(t, dir, frs, 1)
	})
	t.Run("lost truncation", func(t *testing.T) {
		dir := t.TempDir()
		frs := writeFrames(t, dir, []bool{true, false, false, false})
		// Segment 3 lost C's bytes and kept its prefill's zeros; D in
		// segment 4 is whole.
		patchSeg(t, dir, 3, func(b []byte) []byte {
			clear(b[frs[2].at.Off:])
			return append(b, make([]byte, 8192)...)
		})
		loseIndex(t, dir, frs)
		checkCut(t, dir, frs, 2)
	})
	t.Run("synced then zeroed", func(t *testing.T) {
		dir := t.TempDir()
		frs := writeFrames(t, dir, []bool{true, true, false})
		patchSeg(t, dir, 2, zeroFrame(frs[1]))
		loseIndexAt(t, dir, frs, 1)
		wantDamage(t, dir)
	})
	t.Run("synced then garbled", func(t *testing.T) {
		dir := t.TempDir()
		frs := writeFrames(t, dir, []bool{true, true, false})
		patchSeg(t, dir, 2, func(b []byte) []byte { b[frs[1].at.Off+200] ^= 1; return b })
		loseIndexAt(t, dir, frs, 1)
		wantDamage(t, dir)
	})
}

// toV2 rewrites segment n's frames with the header of store format 5 (no
// mark), as a store written before marks holds them.
func toV2(t *testing.T, dir string, n uint64) {
	t.Helper()
	patchSeg(t, dir, n, func(b []byte) []byte {
		out := slices.Clone(b[:segHeaderSize])
		data := segBytes{0, b}
		for off := int64(segHeaderSize); off < int64(len(b)); {
			fh, end, why := frameAt(data, off)
			if why != "" {
				out = append(out, b[off:]...)
				break
			}
			h := make([]byte, frameHeaderV2Size)
			binary.BigEndian.PutUint32(h, frameMagicV2)
			binary.BigEndian.PutUint32(h[4:], uint32(fh.length))
			binary.BigEndian.PutUint64(h[8:], fh.first)
			binary.BigEndian.PutUint64(h[16:], fh.last)
			binary.BigEndian.PutUint32(h[24:], fh.crc)
			binary.BigEndian.PutUint32(h[28:], crc32.Checksum(h[:28], castagnoli))
			out = append(append(out, h...), b[off+int64(fh.size):end]...)
			off = end
		}
		return out
	})
}

// TestPowerCutUnmarked: frames without marks (store format 5) prove
// nothing, so a bad frame before an intact one stays damage, as it was;
// a format-5 log reads whole.
func TestPowerCutUnmarked(t *testing.T) {
	scan := func(t *testing.T, dir string) scanResult {
		l, err := openSegLog(filepath.Join(dir, "db.log"), testID, true, false)
		if err != nil {
			t.Fatal(err)
		}
		defer l.close()
		res, err := l.scan(Pos{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	dir := t.TempDir()
	writeFrames(t, dir, []bool{true, false, false})
	toV2(t, dir, 1)
	res := scan(t, dir)
	if res.damage != nil || res.cut || len(res.frames) != 3 {
		t.Fatalf("scan of a format-5 log: %d frames, cut %v, damage %v", len(res.frames), res.cut, res.damage)
	}
	fr := res.frames
	patchSeg(t, dir, 1, func(b []byte) []byte { clear(b[fr[1].at.Off:fr[1].end]); return b })
	if res := scan(t, dir); res.damage == nil {
		t.Fatalf("zeros before an unmarked intact frame: cut %v, no damage", res.cut)
	}
}

// TestPowerCutMixed: a log upgraded from format 5, its old frames without
// marks and the new ones with: an unsynced new frame zeroed before a
// whole one is cut; an old frame zeroed before a new frame whose mark lies
// beyond it (it was synced) is damage.
func TestPowerCutMixed(t *testing.T) {
	prep := func(t *testing.T) (string, []pcFrame) {
		dir := t.TempDir()
		old := writeFrames(t, dir, []bool{false, true})
		toV2(t, dir, 1)
		// The offsets moved by 16 bytes a frame; the reopen below
		// replays the rewritten frames into the index.
		loseIndexAt(t, dir, old, 0)
		s, db := openTestLog(t, dir)
		_ = s.CloseLog()
		_ = db.Close()
		frs := writeFrames(t, dir, []bool{false, false})
		return dir, frs
	}
	t.Run("new frame zeroed", func(t *testing.T) {
		dir, frs := prep(t)
		patchSeg(t, dir, 1, zeroFrame(frs[0]))
		loseIndexAt(t, dir, frs, 0)
		checkCut(t, dir, frs, 0)
	})
	t.Run("old frame zeroed", func(t *testing.T) {
		dir, frs := prep(t)
		l, err := openSegLog(filepath.Join(dir, "db.log"), testID, true, false)
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.scan(Pos{})
		_ = l.close()
		if err != nil || len(res.frames) != 4 {
			t.Fatalf("scan: %d frames, %v", len(res.frames), err)
		}
		old := res.frames[1]
		patchSeg(t, dir, 1, func(b []byte) []byte { clear(b[old.at.Off:old.end]); return b })
		loseIndexAt(t, dir, frs, 0)
		setPos(t, dir, res.frames[0].at)
		wantDamage(t, dir)
	})
}

// setPos sets the index's log position.
func setPos(t *testing.T, dir string, p Pos) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set(KeyLogPos, p.encode()) }); err != nil {
		t.Fatal(err)
	}
}

// TestMarksAdvance: a frame's mark is where the last completed sync left
// the log (a reopen starts it at the log's end, which it syncs), never
// past the frame's own start.
func TestMarksAdvance(t *testing.T) {
	dir := t.TempDir()
	frs := writeFrames(t, dir, []bool{true, false, true, false})
	more := writeFrames(t, dir, []bool{false}) // after a reopen
	l, err := openSegLog(filepath.Join(dir, "db.log"), testID, true, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	_, data, err := l.readSegment(1, segHeaderSize)
	if err != nil {
		t.Fatal(err)
	}
	end := func(i int) Pos { return Pos{1, frs[i].end} }
	want := []Pos{{1, segHeaderSize}, end(0), end(0), end(2), end(3)}
	var got []Pos
	framesAfter(data, segHeaderSize, func(fh frameHeader, at, _ int64) {
		if !fh.marked || posLess(Pos{1, at}, fh.mark) {
			t.Errorf("frame at %d: mark %v (marked %v), past its own start", at, fh.mark, fh.marked)
		}
		got = append(got, fh.mark)
	})
	if !slices.Equal(got, want) || more[0].at != end(3) {
		t.Fatalf("marks %v, want %v", got, want)
	}
}

const cutKillEnv = "REYNFS_CUT_KILL_DIR"

// TestPowerCutKillDuringCut: kill -9 of the open that cuts a torn tail
// spanning segments, after it removed the last one ("cut"): the next open
// finds the same tail, finishes the cut and loses nothing synced.
func TestPowerCutKillDuringCut(t *testing.T) {
	if dir := os.Getenv(cutKillEnv); dir != "" {
		db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "db")).WithLogger(nil))
		if err != nil {
			t.Fatal(err)
		}
		s, err := OpenLogged(db, filepath.Join(dir, "db.log"), LogOptions{ID: testID, Create: true})
		if err != nil {
			t.Fatal(err)
		}
		s.SetFault(func(op string) error {
			if op == "cut" {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			return nil
		})
		_, err = s.CatchUp(false)
		t.Fatalf("catch-up returned (%v) instead of reaching the cut", err)
	}
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	defer func(n int64) { segmentSize = n }(segmentSize)
	segmentSize = 4096
	dir := t.TempDir()
	frs := writeFrames(t, dir, []bool{true, false, false, false})
	patchSeg(t, dir, 2, zeroFrame(frs[1]))
	loseIndex(t, dir, frs)
	cmd := exec.Command(os.Args[0], "-test.run=^TestPowerCutKillDuringCut$", "-test.count=1")
	cmd.Env = append(os.Environ(), cutKillEnv+"="+dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL at the cut: %v", err)
	}
	if segs, _ := listSegments(filepath.Join(dir, "db.log")); !slices.Equal(segs, []uint64{1, 2, 3}) {
		t.Fatalf("segments %v after the kill, want 1 to 3", segs)
	}
	checkCut(t, dir, frs, 1)
}
