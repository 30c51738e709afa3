package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// retainRun runs reynfs with --dir of the mount and fails the test on a
// non-zero exit.
func retainRun(t *testing.T, m *Mount, args ...string) string {
	t.Helper()
	r := m.Run(append(args, "--dir", m.Dir)...)
	if r.Code != 0 {
		t.Fatalf("reynfs %s: exit %d: %s%s\nlog:\n%s", strings.Join(args, " "), r.Code, r.Stderr, r.Stdout, m.LogTail(10))
	}
	return r.Stdout
}

// checkpointSeq cuts a generation and returns its seq.
func checkpointSeq(t *testing.T, m *Mount, label string) uint64 {
	t.Helper()
	var c struct {
		Generation struct {
			Seq uint64 `json:"seq"`
		} `json:"generation"`
	}
	out := retainRun(t, m, "checkpoint", "-m", label, "--json")
	if err := json.Unmarshal([]byte(out), &c); err != nil || c.Generation.Seq == 0 {
		t.Fatalf("checkpoint --json: %v: %q", err, out)
	}
	return c.Generation.Seq
}

type gcJSON struct {
	Floor       uint64 `json:"floor_seq"`
	Records     int    `json:"records"`
	DroppedGens int    `json:"dropped_gens"`
	Objects     int    `json:"objects"`
	ObjectBytes int64  `json:"object_bytes"`
	Floors      struct {
		By string `json:"floor_by"`
	} `json:"floors"`
	DiskFrom int64 `json:"disk_bytes_before"`
	DiskTo   int64 `json:"disk_bytes_after"`
}

// duKiB is du -sk of path.
func duKiB(t *testing.T, path string) int64 {
	t.Helper()
	out, err := exec.Command("du", "-sk", path).Output()
	if err != nil {
		t.Fatalf("du -sk %s: %v", path, err)
	}
	var kib int64
	if _, err := fmt.Sscan(string(out), &kib); err != nil {
		t.Fatalf("du -sk %s: %q: %v", path, out, err)
	}
	return kib
}

// writeUnique writes n files of size bytes of random data under dir.
func writeUnique(t *testing.T, dir, prefix string, n, size int) {
	t.Helper()
	for i := range n {
		if err := writeOnMount(t, filepath.Join(dir, fmt.Sprintf("%s%d", prefix, i)), randomBytes(t, size)); err != nil {
			t.Fatal(err)
		}
	}
}

func removeUnique(t *testing.T, dir, prefix string, n int) {
	t.Helper()
	for i := range n {
		if err := os.Remove(filepath.Join(dir, fmt.Sprintf("%s%d", prefix, i))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRetentionLive: with tiny windows (one record, one generation), a gc
// on the mounted store drops 50 MiB of unique data written across
// generations and then deleted; a rewind below the floor is refused,
// naming the floor and the window (kind not_retained); the daemon's own
// collector, every second, drops the next batch without being asked; and
// what is retained checks clean (fsck at cleanup).
func TestRetentionLive(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "README"), []byte("kept\n"), 0o644)
	m := mountProject(t, dir)
	retainRun(t, m, "retention", "set", "--seqs", "1", "--generations", "1", "--every", "1h")

	const files, size = 5, 10 << 20
	writeUnique(t, dir, "big", files, size)
	data := checkpointSeq(t, m, "data")
	removeUnique(t, dir, "big", files)
	checkpointSeq(t, m, "deleted")

	before := duKiB(t, m.Store)
	var g gcJSON
	out := retainRun(t, m, "gc", "--json")
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatalf("gc --json: %v: %q", err, out)
	}
	if g.ObjectBytes < files*size*9/10 || g.Floor <= data || g.DroppedGens < 1 || g.Records < files {
		t.Fatalf("gc freed %d objects (%d bytes), %d records, %d generations, floor %d; want the %d bytes written, the floor past seq %d",
			g.Objects, g.ObjectBytes, g.Records, g.DroppedGens, g.Floor, files*size, data)
	}
	after := duKiB(t, m.Store)
	t.Logf("gc: %d objects, %d MiB; store %d -> %d KiB (du -sk)", g.Objects, g.ObjectBytes>>20, before, after)
	if freed := before - after; freed < files*size/1024*8/10 {
		t.Errorf("du -sk of the store: %d KiB before gc, %d after; want at least 80%% of the %d KiB deleted back", before, after, files*size/1024)
	}

	r := m.Run("rewind", fmt.Sprint(data), "--dir", m.Dir)
	if r.Code != 2 || !strings.Contains(r.Stderr, "below the retention floor") ||
		!strings.Contains(r.Stderr, fmt.Sprintf("seq %d", g.Floor)) || !strings.Contains(r.Stderr, "seqs window (1 records)") {
		t.Fatalf("rewind below the floor: exit %d, %q; want exit 2 naming the floor seq %d and the window", r.Code, r.Stderr, g.Floor)
	}
	r = m.Run("rewind", fmt.Sprint(data), "--json", "--dir", m.Dir)
	if r.Code != 2 || !strings.Contains(r.Stdout+r.Stderr, `"kind":"not_retained"`) {
		t.Fatalf("rewind below the floor --json: exit %d, %q %q; want kind not_retained", r.Code, r.Stdout, r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, ".reynfs", "seq", fmt.Sprint(data))); err == nil {
		t.Errorf("the view of seq %d below the floor exists", data)
	}

	// The daemon's collector, every second, drops the next batch alone.
	retainRun(t, m, "retention", "set", "--every", "1s")
	writeUnique(t, dir, "more", 2, 1<<20)
	more := checkpointSeq(t, m, "more")
	removeUnique(t, dir, "more", 2)
	last := checkpointSeq(t, m, "after")
	deadline := time.Now().Add(15 * time.Second)
	for {
		var info struct {
			Floor uint64 `json:"floor_seq"`
		}
		out := retainRun(t, m, "retention", "--json")
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatalf("retention --json: %v: %q", err, out)
		}
		if info.Floor >= last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's collector did not move the floor past %d in 15 s (floor %d)\nlog:\n%s", more, info.Floor, m.LogTail(10))
		}
		time.Sleep(200 * time.Millisecond)
	}
	var dry gcJSON
	if err := json.Unmarshal([]byte(retainRun(t, m, "gc", "--dry-run", "--json")), &dry); err != nil {
		t.Fatal(err)
	}
	if dry.Objects != 0 || dry.Records != 0 {
		t.Errorf("after the daemon's collection a dry gc would still free %d objects, %d records", dry.Objects, dry.Records)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "README")); err != nil || string(b) != "kept\n" {
		t.Errorf("README after the collections: %q, %v", b, err)
	}
	m.Unmount()
}
