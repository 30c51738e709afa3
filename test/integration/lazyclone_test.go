package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// lazyCounters is status --json's "lazy" object.
type lazyCounters struct {
	RemoteObjects   int64 `json:"remote_objects"`
	DemandObjects   int64 `json:"demand_objects"`
	DemandRequests  int64 `json:"demand_requests"`
	PrefetchObjects int64 `json:"prefetch_objects"`
}

func lazyStatus(t *testing.T, m *Mount) *lazyCounters {
	t.Helper()
	r := m.Run("status", m.Dir, "--store", m.Store, "--json")
	if r.Code != 0 {
		t.Fatalf("reynfs status: exit %d: %s", r.Code, r.Stderr)
	}
	var st struct {
		Lazy *lazyCounters `json:"lazy"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
		t.Fatalf("status --json: %v: %s", err, r.Stdout)
	}
	return st.Lazy
}

// TestLazyClone: a 10k-file workspace with a git repository, pushed to a
// file:// remote, cloned with --lazy --prefetch=false on a second store
// and mounted: git status fetches no file data (trees are local), a cat
// of one file is one ranged GET, and the whole tree then equals the
// original (diff -r).
func TestLazyClone(t *testing.T) {
	requireFUSE(t)
	requireTool(t, "git")
	requireTool(t, "diff")
	base := t.TempDir()
	src := filepath.Join(base, "proj")
	const dirs, per = 100, 100
	for d := range dirs {
		for f := range per {
			body := strings.Repeat(fmt.Sprintf("dir %d file %d\n", d, f), 1+(d*per+f)%40)
			writeFile(t, filepath.Join(src, fmt.Sprintf("d%03d", d), fmt.Sprintf("f%03d.txt", f)), []byte(body), 0o644)
		}
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 5 chunks
	writeFile(t, filepath.Join(src, "big.bin"), big, 0o644)
	m := mountProject(t, src)
	// Inside the mount, so the index holds the mount's stat data; no
	// automatic gc (10k loose objects start one, detached, which keeps
	// the mount busy).
	sh(t, src, gitEnv, "git init -q && git config gc.auto 0 && git config maintenance.auto false && git add -A && git commit -qm init && git status --porcelain")
	m.Unmount()
	remote := filepath.Join(base, "remote")
	if err := os.Mkdir(remote, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"remote", "add", "origin", "file://" + remote, "--dir", src, "--store", m.Store},
		{"push", "--dir", src, "--store", m.Store},
	} {
		if r := m.Run(args...); r.Code != 0 {
			t.Fatalf("reynfs %s: exit %d: %s%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
		}
	}

	c := &Mount{t: t, Dir: filepath.Join(base, "clone"), Store: filepath.Join(base, "store2"), env: testEnv(t)}
	t.Cleanup(c.cleanup)
	start := time.Now()
	if r := c.Run("clone", "--lazy", "--prefetch=false", "file://"+remote+"#proj", c.Dir, "--store", c.Store); r.Code != 0 {
		t.Fatalf("reynfs clone --lazy: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	cloned := time.Since(start)
	c.Mount()
	t.Logf("clone --lazy of %d files: %v; clone+mount: %v", dirs*per+1, cloned, time.Since(start))

	before := lazyStatus(t, c)
	if before == nil || before.RemoteObjects < dirs*per || before.DemandRequests != 0 || before.PrefetchObjects != 0 {
		t.Fatalf("status after mount: %+v; want the file data on the remote, nothing fetched", before)
	}
	if out := sh(t, c.Dir, gitEnv, "git status --porcelain"); strings.TrimSpace(out) != "" {
		t.Errorf("git status in the lazy clone: %q, want clean", out)
	}
	if after := lazyStatus(t, c); after.DemandRequests != 0 || after.DemandObjects != 0 {
		t.Errorf("git status fetched data: %+v", after)
	}
	one := filepath.Join("d042", "f017.txt")
	got, err := exec.Command("cat", filepath.Join(c.Dir, one)).Output()
	want, _ := os.ReadFile(filepath.Join(src, one))
	if err != nil || !bytes.Equal(got, want) || len(want) == 0 {
		t.Fatalf("cat %s: %v (%d bytes, want %d)", one, err, len(got), len(want))
	}
	if after := lazyStatus(t, c); after.DemandRequests != 1 || after.DemandObjects != 1 {
		t.Errorf("cat of one file: %+v; want one ranged GET", after)
	}
	// The remote loses the data packs: a read is EIO with a log line
	// naming the remote, nothing is kept; once they are back it reads.
	packs, _ := filepath.Glob(filepath.Join(remote, "packs", "*.pack"))
	for _, p := range packs {
		if err := os.Rename(p, p+".away"); err != nil {
			t.Fatal(err)
		}
	}
	two := filepath.Join("d007", "f003.txt")
	out, err := exec.Command("cat", filepath.Join(c.Dir, two)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Input/output error") {
		t.Errorf("cat with the packs gone: %v %q; want EIO", err, out)
	}
	if log := c.Log(); !strings.Contains(log, "lazy store: fetch from the remote failed") || !strings.Contains(log, "file://"+remote) {
		t.Errorf("no log line naming the remote for the failed fetch:\n%s", c.LogTail(5))
	}
	for _, p := range packs {
		if err := os.Rename(p+".away", p); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("diff", "-r", src, c.Dir).CombinedOutput(); err != nil {
		// A file whose read failed just now may still answer the
		// remembered failure (2 s): once more after that.
		time.Sleep(2500 * time.Millisecond)
		if out, err = exec.Command("diff", "-r", src, c.Dir).CombinedOutput(); err != nil {
			t.Fatalf("diff -r original clone: %v\n%.2000s", err, out)
		}
		t.Logf("first diff -r after the packs came back: %.300s", out)
	}
	end := lazyStatus(t, c)
	t.Logf("after diff -r: %+v", end)
	// One ranged GET per object read, and the one that failed (the few
	// left are in no file of the live tree: earlier versions).
	if end == nil || end.DemandRequests != end.DemandObjects+1 || end.DemandObjects < dirs*per {
		t.Errorf("after reading every file: %+v, want one request per object", end)
	}
	c.Unmount() // fetches the rest, then writes the files into the directory
	r := c.Run("status", c.Dir, "--store", c.Store, "--json")
	if !strings.Contains(r.Stdout, `"head_seq"`) || strings.Contains(r.Stdout, `"lazy"`) {
		t.Errorf("status of the unmounted clone: %s%s; want no lazy part (the store is whole)", r.Stdout, r.Stderr)
	}
	if out, err := exec.Command("diff", "-r", src, c.Dir).CombinedOutput(); err != nil {
		t.Fatalf("diff -r after the clone's write-back: %v\n%.2000s", err, out)
	}
}

// TestLazyClonePrefetch: a lazy clone mounted with the prefetcher on
// fetches everything in the background, in fewer requests than objects,
// and then says the store is whole; the files read nothing more.
func TestLazyClonePrefetch(t *testing.T) {
	requireFUSE(t)
	requireTool(t, "diff")
	base := t.TempDir()
	src := filepath.Join(base, "proj")
	for i := range 300 {
		writeFile(t, filepath.Join(src, fmt.Sprintf("d%d", i%7), fmt.Sprintf("f%03d", i)), bytes.Repeat([]byte{byte(i)}, 100+i*50), 0o644)
	}
	m := mountProject(t, src)
	m.Unmount()
	remote := filepath.Join(base, "remote")
	if err := os.Mkdir(remote, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"remote", "add", "origin", "file://" + remote, "--dir", src, "--store", m.Store},
		{"push", "--dir", src, "--store", m.Store},
	} {
		if r := m.Run(args...); r.Code != 0 {
			t.Fatalf("reynfs %s: exit %d: %s%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
		}
	}
	c := &Mount{t: t, Dir: filepath.Join(base, "clone"), Store: filepath.Join(base, "store2"), env: testEnv(t)}
	t.Cleanup(c.cleanup)
	if r := c.Run("clone", "--lazy", "file://"+remote+"#proj", c.Dir, "--store", c.Store); r.Code != 0 {
		t.Fatalf("reynfs clone --lazy: exit %d: %s%s", r.Code, r.Stdout, r.Stderr)
	}
	// The clone pins the data packs it reads from, until it is whole.
	pins := func() []string {
		t.Helper()
		names, err := filepath.Glob(filepath.Join(remote, "pins", "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	if p := pins(); len(p) != 1 {
		t.Fatalf("pins after clone --lazy: %q; want one", p)
	}
	c.Mount()
	var st struct {
		Lazy *struct {
			Complete         bool  `json:"complete"`
			PrefetchObjects  int64 `json:"prefetch_objects"`
			PrefetchRequests int64 `json:"prefetch_requests"`
			DemandRequests   int64 `json:"demand_requests"`
		} `json:"lazy"`
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		r := c.Run("status", c.Dir, "--store", c.Store, "--json")
		if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
			t.Fatalf("status --json: %v: %s%s", err, r.Stdout, r.Stderr)
		}
		if st.Lazy != nil && st.Lazy.Complete {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the prefetcher did not finish in 2 minutes: %+v\n%s", st.Lazy, c.LogTail(5))
		}
		time.Sleep(100 * time.Millisecond)
	}
	l := st.Lazy
	if l.PrefetchObjects < 290 || l.PrefetchRequests >= l.PrefetchObjects || l.DemandRequests != 0 {
		t.Errorf("prefetch: %+v; want every object in fewer requests, none on demand", l)
	}
	t.Logf("prefetch: %+v", l)
	if out, err := exec.Command("diff", "-r", src, c.Dir).CombinedOutput(); err != nil {
		t.Fatalf("diff -r: %v\n%.2000s", err, out)
	}
	if r := c.Run("status", c.Dir, "--store", c.Store); !strings.Contains(r.Stdout, "the store is whole") {
		t.Errorf("status after the prefetch: %s", r.Stdout)
	}
	if p := pins(); len(p) != 0 {
		t.Errorf("pins once the store is whole: %q; want none", p)
	}
}
