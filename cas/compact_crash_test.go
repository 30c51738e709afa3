package cas_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/castest"
)

const (
	compactCrashEnv  = "REYNFS_COMPACT_CRASH_DIR"
	compactStepEnv   = "REYNFS_COMPACT_CRASH_STEP"
	compactCrashKept = 10
)

// TestCompactCrash SIGKILLs a compaction after each of its steps (the
// active segment sealed, copies appended with their index, the log and
// index synced, the old segment unlinked) and reopens the store: every
// kept object (a delta chain among them) reads back and is in the index
// once, no dropped one is back, and the next compaction leaves one
// segment.
func TestCompactCrash(t *testing.T) {
	if dir := os.Getenv(compactCrashEnv); dir != "" {
		s, _ := openLogged(t, dir)
		step := os.Getenv(compactStepEnv)
		_, err := s.Compact(func(name string) {
			if name == step {
				fmt.Printf("at %s\n", name)
				time.Sleep(time.Minute)
			}
		}, nil)
		fmt.Printf("finished: %v\n", err)
		time.Sleep(time.Minute)
		return
	}
	if testing.Short() {
		t.Skip("crash test re-executes the test binary")
	}
	base := t.TempDir()
	src := filepath.Join(base, "src")
	s, db := openLogged(t, src)
	vs := versions(6) // a delta chain, moved with the rest
	vhs := putVersions(t, s, vs)
	var all []cas.Hash
	data := map[cas.Hash][]byte{}
	for i := range 40 {
		d := castest.Data(uint64(i)+200, 256<<10)
		h, err := s.Put(d)
		if err != nil {
			t.Fatal(err)
		}
		all, data[h] = append(all, h), d
	}
	s.BeginSweep()
	if _, err := s.Sweep(all[compactCrashKept:], nil); err != nil {
		t.Fatal(err)
	}
	s.EndSweep()
	closeLogged(t, s, db)

	for _, step := range []string{"rolled", "copied", "index synced", "unlinked"} {
		dir := filepath.Join(base, strings.ReplaceAll(step, " ", "-"))
		if out, err := exec.Command("cp", "-a", "--sparse=always", src, dir).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
		killCompactAt(t, dir, step)
		s, db := openLogged(t, dir)
		check := func(when string) {
			t.Helper()
			n := 0
			if err := s.Each(func(cas.Hash, int64) error { n++; return nil }); err != nil {
				t.Fatal(err)
			}
			if n != compactCrashKept+len(vhs) {
				t.Errorf("killed %s, %s: the index lists %d objects, want %d", step, when, n, compactCrashKept+len(vhs))
			}
			checkVersions(t, s, vhs, vs)
			for i, h := range all {
				got, err := s.Get(h)
				if i < compactCrashKept && (err != nil || !bytes.Equal(got, data[h])) {
					t.Fatalf("killed %s, %s: kept object %d: %v", step, when, i, err)
				}
				if ok, _ := s.Has(h); i >= compactCrashKept && ok {
					t.Fatalf("killed %s, %s: dropped object %d is back", step, when, i)
				}
			}
		}
		check("reopened")
		if _, err := s.Compact(nil, nil); err != nil {
			t.Fatalf("killed %s: the next compaction: %v", step, err)
		}
		check("compacted again")
		if names, _ := segments(t, dir); len(names) != 1 {
			t.Errorf("killed %s, compacted again: segments %v, want one", step, names)
		}
		closeLogged(t, s, db)
	}
}

func killCompactAt(t *testing.T, dir, step string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCompactCrash$", "-test.count=1")
	cmd.Env = append(os.Environ(), compactCrashEnv+"="+dir, compactStepEnv+"="+step)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l := <-lines:
		if l != "at "+step {
			_ = cmd.Process.Kill()
			t.Fatalf("compaction child for %q: %q", step, l)
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("compaction child did not reach %q in 60 s", step)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}
