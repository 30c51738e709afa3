package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
)

// writeMarks writes the marks of ms in turn through one manifestFile, as
// the marks goroutine does, and returns the file's path.
func writeMarks(t *testing.T, ms ...Manifest) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db.manifest")
	if err := writeManifest(path, &ms[0]); err != nil {
		t.Fatal(err)
	}
	w := &manifestFile{path: path}
	defer w.close()
	for _, m := range ms[1:] {
		if err := w.write(&m); err != nil {
			t.Fatal(err)
		}
		if got, err := readManifest(path); err != nil || *got != m {
			t.Fatalf("after writing %+v the manifest reads %+v, %v", m, got, err)
		}
	}
	return path
}

// damage overwrites n bytes at off with garbage, as a torn write or a bad
// block would leave them.
func damage(t *testing.T, path string, off, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{'#'}, n), int64(off)); err != nil {
		t.Fatal(err)
	}
}

func marksAt(i uint64) Manifest {
	return Manifest{Format: 1, ID: "abc", Durable: 100 * i, Gen: 100*i - 1}
}

// TestManifestSlots: each slot corrupted in turn leaves the other one's
// marks; both corrupted is a damage error naming the file; and a write
// after a damaged slot goes into that slot, never over the valid one.
func TestManifestSlots(t *testing.T) {
	m1, m2, m3 := marksAt(1), marksAt(2), marksAt(3)
	// m1 in slot A (seq 1), m2 in slot B (seq 2), m3 in slot A (seq 3).
	for _, c := range []struct {
		name string
		off  int
		want Manifest
	}{
		{"newest slot A's checksum line", 60, m2},
		{"newest slot A's first bytes", 0, m2},
		{"older slot B", slotSize + 30, m3},
	} {
		path := writeMarks(t, m1, m2, m3)
		damage(t, path, c.off, 8)
		got, err := readManifest(path)
		if err != nil || *got != c.want {
			t.Errorf("%s damaged: read %+v, %v; want %+v", c.name, got, err, c.want)
			continue
		}
		// The next write must spare the valid slot.
		before, _ := os.ReadFile(path)
		m4 := marksAt(4)
		w := &manifestFile{path: path}
		if err := w.write(&m4); err != nil {
			t.Fatal(err)
		}
		w.close()
		after, _ := os.ReadFile(path)
		valid := 1 // the slot that held c.want: m2 in B, m3 in A
		if c.want == m3 {
			valid = 0
		}
		if !bytes.Equal(before[valid*slotSize:(valid+1)*slotSize], after[valid*slotSize:(valid+1)*slotSize]) {
			t.Errorf("%s damaged: the write after it changed the valid slot", c.name)
		}
		if got, err := readManifest(path); err != nil || *got != m4 {
			t.Errorf("%s damaged, then %+v written: read %+v, %v", c.name, m4, got, err)
		}
	}

	// A write torn halfway: the slot it went to fails its checksum.
	path := writeMarks(t, m1, m2)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(encodeSlot(&m3, 3)[:50], 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got, err := readManifest(path); err != nil || *got != m2 {
		t.Errorf("torn write of slot A: read %+v, %v; want %+v", got, err, m2)
	}

	// Both slots damaged: refused, naming the file and what is wrong.
	path = writeMarks(t, m1, m2)
	damage(t, path, 10, 4)
	damage(t, path, slotSize+10, 4)
	if _, err := readManifest(path); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) ||
		!strings.Contains(err.Error(), "slot A: checksum mismatch") || !strings.Contains(err.Error(), "slot B: checksum mismatch") {
		t.Errorf("both slots damaged: %v", err)
	}
	// A file cut short loses slot B only.
	path = writeMarks(t, m1)
	if err := os.Truncate(path, 300); err != nil {
		t.Fatal(err)
	}
	if got, err := readManifest(path); err != nil || *got != m1 {
		t.Errorf("manifest cut after slot A: read %+v, %v", got, err)
	}
	w := &manifestFile{path: path}
	defer w.close()
	for _, m := range []Manifest{m2, m3} { // replaced whole, then in place
		if err := w.write(&m); err != nil {
			t.Fatal(err)
		}
		if got, err := readManifest(path); err != nil || *got != m {
			t.Errorf("manifest cut short, then %+v written: read %+v, %v", m, got, err)
		}
	}
}

// TestManifestDamagedSlotOpen: a store whose newest manifest slot is torn
// opens on the other slot's marks (they claim less); with both slots
// damaged it is refused, the error naming the manifest.
func TestManifestDamagedSlotOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	head := writeSome(t, dir, 3)
	_, slot, seq, err := readManifestFile(ManifestPath(dir))
	if err != nil || slot < 0 || seq < 2 {
		t.Fatalf("manifest after a session: slot %d seq %d, %v; want the slot format with both slots written", slot, seq, err)
	}
	damage(t, ManifestPath(dir), slot*slotSize+20, 4)
	j := openT(t, dir, Options{})
	if j.Head() != head {
		t.Fatalf("head %d, want %d", j.Head(), head)
	}
	g := &Record{Op: OpGeneration, GenKind: "manual", Root: cas.Sum([]byte("root 2"))}
	j.Enqueue(g, nil)
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	m, slot2, _, err := readManifestFile(ManifestPath(dir))
	if err != nil || m.Gen != g.Seq || slot2 != slot {
		t.Fatalf("after a generation at seq %d the manifest says %+v in slot %d, %v; want it in the damaged slot %d", g.Seq, m, slot2, err, slot)
	}
	damage(t, ManifestPath(dir), 20, 4)
	damage(t, ManifestPath(dir), slotSize+20, 4)
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), ManifestPath(dir)) {
		t.Fatalf("open with both slots damaged = %v", err)
	}
}

// TestManifestUpgrade: a store whose manifest is in the first format (one
// text record) opens, and the first write replaces it by the slot format
// with the right marks; a store that writes nothing keeps it readable.
func TestManifestUpgrade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	head := writeSome(t, dir, 3)
	m, err := readManifest(ManifestPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ManifestPath(dir), m.encode(), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, slot, _, err := readManifestFile(ManifestPath(dir)); err != nil || slot != -1 || *got != *m {
		t.Fatalf("first-format manifest reads %+v (slot %d), %v; want %+v", got, slot, err, m)
	}
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ro.Close()

	j := openT(t, dir, Options{})
	g := &Record{Op: OpGeneration, GenKind: "manual", Root: cas.Sum([]byte("root 2"))}
	j.Enqueue(g, nil)
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	got, slot, _, err := readManifestFile(ManifestPath(dir))
	if err != nil || slot < 0 || got.Gen != g.Seq || got.Durable < g.Seq || got.ID != m.ID || g.Seq <= head {
		t.Fatalf("after a generation at seq %d the manifest reads %+v (slot %d), %v", g.Seq, got, slot, err)
	}
	if st, err := os.Stat(ManifestPath(dir)); err != nil || st.Size() != 2*slotSize {
		t.Fatalf("upgraded manifest: %v, %v", st, err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openT(t, dir, Options{})
	if j.Head() < g.Seq {
		t.Fatalf("reopened after the upgrade: head %d, want at least %d", j.Head(), g.Seq)
	}
}

// TestResetCount: the count every reply's head carries stays len(Resets())
// while resets are committed concurrently with the first count, and after
// reopening.
func TestResetCount(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	j := openT(t, dir, Options{})
	check := func(step string) {
		t.Helper()
		n, err := j.ResetCount()
		rs, rerr := j.Resets()
		if err != nil || rerr != nil || n != len(rs) {
			t.Fatalf("%s: ResetCount %d (%v), Resets holds %d (%v)", step, n, err, len(rs), rerr)
		}
	}
	appendT(t, j, &Record{Op: OpUnlink, Parent: 1, Name: "x"})
	appendT(t, j, &Record{Op: OpReset, ResetTo: 1})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50 {
			if err := j.Enqueue(&Record{Op: OpReset, ResetTo: 1}, nil).Wait(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 20 {
		if _, err := j.ResetCount(); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	check("after 51 resets")
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openT(t, dir, Options{})
	check("reopened")
	appendT(t, j, &Record{Op: OpReset, ResetTo: 2})
	check("one more")
	if n, _ := j.ResetCount(); n != 52 {
		t.Fatalf("ResetCount %d, want 52", n)
	}
}

// A sync that moves only the durable seq leaves the marks writer asleep
// while its wake-up at the end of the interval is pending: a write+fsync
// loop does not wake it once per fsync. The last seq is still written.
func TestMarksDurableLeavesWriterAsleep(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.manifest")
	m := Manifest{Format: 1, ID: "abc"}
	if err := writeManifest(path, &m); err != nil {
		t.Fatal(err)
	}
	k := newMarks(path, m, zerolog.Nop())
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for range 10000 {
			k.mu.Lock()
			done := ok()
			k.mu.Unlock()
			if done {
				return
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("marks writer: never %s", what)
	}
	k.durable(1) // written at once: no write yet in this interval
	waitFor("wrote seq 1", func() bool { return k.have.Durable == 1 })
	// Within the interval the writer arms its timer (a slow manifest
	// write can end the interval first: then the next sync writes again).
	seq := uint64(1)
	waitFor("armed its timer", func() bool {
		if !k.timer {
			seq++
			k.mu.Unlock()
			k.durable(seq)
			k.mu.Lock()
		}
		return k.timer
	})
	k.mu.Lock()
	before := k.wakes
	k.mu.Unlock()
	const syncs = 200
	for range syncs {
		seq++
		k.durable(seq)
		for range 10 {
			runtime.Gosched() // let a woken writer run
		}
	}
	k.mu.Lock()
	woke := k.wakes - before
	k.mu.Unlock()
	// The timer wakes it every manifestInterval, so a slow machine may
	// see a few wake-ups; one per sync is the bug.
	if woke >= syncs/10 {
		t.Errorf("%d syncs woke the marks writer %d times; want about one per %s", syncs, woke, manifestInterval)
	}
	last := seq
	waitFor("wrote the last seq", func() bool { return k.have.Durable == last })
	k.close()
	if got, err := readManifest(path); err != nil || got.Durable != last {
		t.Fatalf("manifest after close: %+v, %v; want durable %d", got, err, last)
	}
}
