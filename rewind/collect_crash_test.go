package rewind

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
)

// collectCrashEnv switches the test binary into the crash child: it runs a
// collection on the store in that directory and stops at the step named
// by collectStepEnv, printing the step, until it is killed.
const (
	collectCrashEnv = "REYNFS_COLLECT_CRASH_DIR"
	collectStepEnv  = "REYNFS_COLLECT_CRASH_STEP"
)

// crashSteps are the collection's steps that change the store, in order
// (the value-log GC after them is Badger's, crash-safe by its design).
var crashSteps = []string{"floor raised", "floors", "truncated", "swept a batch", "swept"}

// TestCollectCrash SIGKILLs a collection at each of its steps and checks
// the store a restart finds: every generation it lists and the head
// reconstruct with all their objects, and a second collection finishes the
// first one's work (the same objects and generations as a collection that
// was never interrupted).
func TestCollectCrash(t *testing.T) {
	if dir := os.Getenv(collectCrashEnv); dir != "" {
		collectCrashChild(t, dir, os.Getenv(collectStepEnv))
		return
	}
	if testing.Short() {
		t.Skip("crash test re-executes the test binary")
	}
	base := t.TempDir()
	w := &workspace{dir: filepath.Join(base, "store")}
	w.open(t)
	// More than a sweep batch of objects to drop, and some to keep.
	for i := range 2 * cas.SweepBatch {
		putFile(t, w, fmt.Sprintf("old%d", i), uniqueData(byte(i), 3000+i))
	}
	cutGen(t, w, KindManual, "old")
	for i := range 2 * cas.SweepBatch {
		if err := w.live.Unlink(modelCaller, tree.RootIno, fmt.Sprintf("old%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	putFile(t, w, "kept", []byte("kept"))
	cutGen(t, w, KindManual, "new")
	if err := SavePolicy(w.j, Policy{Seqs: Window{Count: 1}, Generations: Window{Count: 1}, Every: time.Minute}); err != nil {
		t.Fatal(err)
	}
	w.close(t)

	// The uninterrupted result, on a copy.
	clean := copyStore(t, w.dir, filepath.Join(base, "clean"))
	j := openJournal(t, clean)
	if _, err := Collect(j, CollectOptions{}); err != nil {
		t.Fatal(err)
	}
	wantObjs, _, _ := j.Objects().Stats()
	wantGens, _ := Timeline(j)
	_ = j.Close()

	for _, step := range crashSteps {
		dir := copyStore(t, w.dir, filepath.Join(base, strings.ReplaceAll(step, " ", "-")))
		runCollectAndKill(t, dir, step)
		j := openJournal(t, dir)
		checkRetainedStates(t, step, j)
		if _, err := Collect(j, CollectOptions{}); err != nil {
			t.Fatalf("killed at %q: the next collection: %v", step, err)
		}
		checkRetainedStates(t, step+", then collected", j)
		objs, _, _ := j.Objects().Stats()
		gens, _ := Timeline(j)
		if objs != wantObjs || len(gens) != len(wantGens) || gens[0].ID != wantGens[0].ID {
			t.Errorf("killed at %q, then collected: %d objects, %d generations (first g%d); uninterrupted: %d, %d (g%d)",
				step, objs, len(gens), gens[0].ID, wantObjs, len(wantGens), wantGens[0].ID)
		}
		_ = j.Close()
	}
}

// checkRetainedStates: the head and every listed generation reconstruct
// and every object they reach is there.
func checkRetainedStates(t *testing.T, when string, j *journal.Journal) {
	t.Helper()
	gens, err := Timeline(j)
	if err != nil {
		t.Fatalf("killed at %q: timeline: %v", when, err)
	}
	var roots []cas.Hash
	for _, g := range gens {
		if _, err := Reconstruct(j, g.Rec.Seq); err != nil {
			t.Errorf("killed at %q: g%d (seq %d): %v", when, g.ID, g.Rec.Seq, err)
		}
		roots = append(roots, g.Rec.Root)
	}
	if _, err := cas.Verify(j.Objects(), roots); err != nil {
		t.Errorf("killed at %q: generations: %v", when, err)
	}
	head, err := Reconstruct(j, j.Head())
	if err != nil {
		t.Fatalf("killed at %q: head: %v", when, err)
	}
	n, err := head.Lookup(tree.RootIno, "kept")
	if err != nil {
		t.Fatalf("killed at %q: head has no kept: %v", when, err)
	}
	buf := make([]byte, 16)
	if k, err := head.ReadAt(n, buf, 0); err != nil || string(buf[:k]) != "kept" {
		t.Errorf("killed at %q: kept reads %q, %v", when, buf[:k], err)
	}
}

func collectCrashChild(t *testing.T, dir, step string) {
	j := openJournal(t, dir)
	_, err := Collect(j, CollectOptions{step: func(name string) {
		if name == step {
			fmt.Printf("at %s\n", name)
			time.Sleep(time.Minute) // killed here
		}
	}})
	fmt.Printf("finished: %v\n", err)
	time.Sleep(time.Minute)
}

// runCollectAndKill runs the child until it reports the step, then kills
// it with SIGKILL.
func runCollectAndKill(t *testing.T, dir, step string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCollectCrash$", "-test.count=1")
	cmd.Env = append(os.Environ(), collectCrashEnv+"="+dir, collectStepEnv+"="+step)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(60 * time.Second)
	for reached := false; !reached; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("crash child for %q exited without reaching it", step)
			}
			if strings.HasPrefix(l, "finished") {
				_ = cmd.Process.Kill()
				t.Fatalf("crash child for %q never reached it: %s", step, l)
			}
			reached = l == "at "+step
		case <-timeout:
			_ = cmd.Process.Kill()
			t.Fatalf("crash child did not reach %q in 60 s", step)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	go func() {
		for range lines {
		}
	}()
}

// copyStore copies the store directory src to dst, with the files a
// store keeps beside it (its log and manifest, when there are), sparse
// files kept sparse (Badger's value log is preallocated).
func copyStore(t *testing.T, src, dst string) string {
	t.Helper()
	for _, suffix := range []string{"", ".log", ".manifest"} {
		if _, err := os.Stat(src + suffix); err != nil {
			continue
		}
		if out, err := exec.Command("cp", "-a", "--sparse=always", src+suffix, dst+suffix).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v: %s", src+suffix, err, out)
		}
	}
	return dst
}
