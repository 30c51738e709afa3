package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind/replica"
)

// asCLI makes the test binary run as reynfs (a child `reynfs push`).
const asCLI = "REYNFS_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// startPush starts `reynfs push --ws proj --dir DIR` as a child that holds before
// its first pack (REYNFS_PUSH_HOLD) with a short lease, and returns once
// it says it is holding: the lease is taken, nothing of the new records
// is written. The child is killed at cleanup if still running.
func startPush(t *testing.T, proj, hold string) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "push", "--ws", "proj", "--dir", proj)
	cmd.Env = append(os.Environ(), asCLI+"=1", replica.HoldEnv+"="+hold, leaseTTLEnv+"=2s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var rest strings.Builder
	r := bufio.NewReader(stderr)
	for {
		line, err := r.ReadString('\n')
		if strings.TrimSpace(line) == "push: holding" {
			break
		}
		rest.WriteString(line)
		if err != nil {
			t.Fatalf("the child push ended before holding: %v\n%s", err, rest.String())
		}
	}
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&rest, r); close(done) }()
	t.Cleanup(func() { <-done })
	return cmd, &rest
}

// cloneHead is the last seq of the store of a clone in dir.
func cloneHead(t *testing.T, dir string) uint64 {
	t.Helper()
	store, err := daemon.DefaultStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(daemon.DBPath(store), journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	return j.Head()
}

// TestTakeoverOfKilledAndStoppedPush drives processes: a `reynfs push`
// killed with SIGKILL mid-push (its lease taken, nothing of its second
// state written) is taken over by `reynfs clone --take` once the lease
// expires; the clone holds what HEAD covered, never more. Then a push of
// the taker is SIGSTOPped mid-push, taken over again, and SIGCONTed: it
// exits non-zero with the deposed line, and a clone shows nothing it
// wrote.
func TestTakeoverOfKilledAndStoppedPush(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	proj := filepath.Join(t.TempDir(), "proj")
	writeTree(t, proj, map[string]string{"a.txt": "one\n"})
	store, err := daemon.DefaultStore(proj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(store, 0o700); err != nil {
		t.Fatal(err)
	}
	importInto(t, daemon.DBPath(store), proj, "first")
	url := "file://" + t.TempDir()
	for _, args := range [][]string{{"remote", "add", "origin", url, "--dir", proj}, {"push", "--dir", proj}} {
		if code := run(args); code != 0 {
			t.Fatalf("reynfs %s: exit %d", strings.Join(args, " "), code)
		}
	}
	first := cloneHead(t, proj)
	writeTree(t, proj, map[string]string{"a.txt": "two\n", "b.txt": strings.Repeat("b", 50000)})
	importInto(t, daemon.DBPath(store), proj, "second")

	child, _ := startPush(t, proj, "1m")
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	taker := filepath.Join(t.TempDir(), "taker")
	start := time.Now()
	if code := run([]string{"clone", "--take", url + "#proj", taker}); code != 0 {
		t.Fatalf("clone --take after kill -9: exit %d", code)
	}
	if time.Since(start) < time.Second {
		t.Errorf("clone --take returned after %s: it did not wait for the killed push's lease", time.Since(start))
	}
	if h := cloneHead(t, taker); h != first {
		t.Fatalf("the taker holds seqs through %d, want exactly the %d the remote's HEAD covered", h, first)
	}
	if b, err := os.ReadFile(filepath.Join(taker, "a.txt")); err != nil || string(b) != "one\n" {
		t.Fatalf("the taker's a.txt = %q, %v; want the first state's", b, err)
	}

	// The taker adds a state and pushes it; SIGSTOP in the middle.
	writeTree(t, taker, map[string]string{"c.txt": strings.Repeat("c", 40000)})
	tstore, err := daemon.DefaultStore(taker)
	if err != nil {
		t.Fatal(err)
	}
	importInto(t, daemon.DBPath(tstore), taker, "third")
	zombie, out := startPush(t, taker, "1500ms")
	if err := zombie.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	second := filepath.Join(t.TempDir(), "second")
	if code := run([]string{"clone", "--take", url + "#proj", second}); code != 0 {
		t.Fatalf("clone --take of a stopped push: exit %d", code)
	}
	if err := zombie.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	err = zombie.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure {
		t.Fatalf("the resumed push: %v, want exit %d\n%s", err, exitFailure, out.String())
	}
	if want := "deposed: workspace proj was taken over at epoch 3 by "; !strings.Contains(out.String(), want) {
		t.Fatalf("the resumed push said %q, want %q", out.String(), want)
	}
	last := filepath.Join(t.TempDir(), "last")
	if code := run([]string{"clone", url + "#proj", last}); code != 0 {
		t.Fatalf("clone after the takeovers: exit %d", code)
	}
	if h := cloneHead(t, last); h != first {
		t.Fatalf("a clone after the stopped push was deposed holds seqs through %d, want %d: nothing it wrote", h, first)
	}
	if _, err := os.Stat(filepath.Join(last, "c.txt")); !os.IsNotExist(err) {
		t.Fatalf("the deposed push's c.txt is in a clone: %v", err)
	}
}

func countPacks(t *testing.T, remote string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(remote, "packs", "*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestForkCommand: `reynfs fork URL#WS@SEQ NEW` writes no pack; a clone
// of NEW holds WS's state at SEQ; its `push --ws NEW` claims NEW and adds packs
// for its new file only (one data pack, one tree pack), and a clone of
// NEW shows the fork's file on the parent's state. Bad input exits 2.
func TestForkCommand(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	proj := filepath.Join(t.TempDir(), "proj")
	writeTree(t, proj, map[string]string{"a.txt": "one\n", "big": strings.Repeat("x", 80000)})
	store, err := daemon.DefaultStore(proj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(store, 0o700); err != nil {
		t.Fatal(err)
	}
	importInto(t, daemon.DBPath(store), proj, "first")
	first := cloneHead(t, proj)
	writeTree(t, proj, map[string]string{"a.txt": "two\n"})
	importInto(t, daemon.DBPath(store), proj, "second")
	remote := t.TempDir()
	url := "file://" + remote
	for _, args := range [][]string{{"remote", "add", "origin", url, "--dir", proj}, {"push", "--dir", proj}} {
		if code := run(args); code != 0 {
			t.Fatalf("reynfs %s: exit %d", strings.Join(args, " "), code)
		}
	}
	packs := countPacks(t, remote)
	at := url + "#proj@" + strconv.FormatUint(first, 10)
	if code := run([]string{"fork", at, "side"}); code != 0 {
		t.Fatalf("fork: exit %d", code)
	}
	if n := countPacks(t, remote); n != packs {
		t.Fatalf("fork wrote %d packs, want none", n-packs)
	}
	side := filepath.Join(t.TempDir(), "side")
	if code := run([]string{"clone", url + "#side", side}); code != 0 {
		t.Fatalf("clone of the fork: exit %d", code)
	}
	if b, err := os.ReadFile(filepath.Join(side, "a.txt")); err != nil || string(b) != "one\n" {
		t.Fatalf("the fork's a.txt = %q, %v; want the parent's at seq %d", b, err, first)
	}
	writeTree(t, side, map[string]string{"new.txt": "side\n"})
	sstore, err := daemon.DefaultStore(side)
	if err != nil {
		t.Fatal(err)
	}
	importInto(t, daemon.DBPath(sstore), side, "side")
	if code := run([]string{"push", "--ws", "side", "--dir", side}); code != 0 {
		t.Fatalf("push --ws side: exit %d", code)
	}
	if n := countPacks(t, remote); n != packs+2 {
		t.Fatalf("the fork's push left %d new packs, want 2 (its new file's chunk, its tree)", n-packs)
	}
	again := filepath.Join(t.TempDir(), "again")
	if code := run([]string{"clone", url + "#side", again}); code != 0 {
		t.Fatalf("clone of the fork: exit %d", code)
	}
	diffR(t, side, again)
	for _, args := range [][]string{
		{"fork", url + "#proj@x", "n"},
		{"fork", url + "#proj", "proj"},
		{"fork", url, "n"},
		{"fork", url + "#proj", "bad/name"},
	} {
		if code := run(args); code != exitUsage {
			t.Errorf("reynfs %s: exit %d, want %d", strings.Join(args, " "), code, exitUsage)
		}
	}
	if code := run([]string{"fork", url + "#proj", "side"}); code != exitFailure {
		t.Errorf("fork onto an existing workspace: exit %d, want %d", code, exitFailure)
	}
}

// TestTakeInterrupted: `reynfs clone --take` of a workspace whose lease
// is live says it waits; Ctrl-C (SIGINT) ends it with exit 130, leaving
// no directory and no store, and the remote's HEAD as it was.
func TestTakeInterrupted(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	proj := filepath.Join(t.TempDir(), "proj")
	writeTree(t, proj, map[string]string{"a.txt": "one\n"})
	store, err := daemon.DefaultStore(proj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(store, 0o700); err != nil {
		t.Fatal(err)
	}
	importInto(t, daemon.DBPath(store), proj, "first")
	remote := t.TempDir()
	url := "file://" + remote
	for _, args := range [][]string{{"remote", "add", "origin", url, "--dir", proj}, {"push", "--dir", proj}} {
		if code := run(args); code != 0 {
			t.Fatalf("reynfs %s: exit %d", strings.Join(args, " "), code)
		}
	}
	b, err := objstore.OpenDir(remote)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data, info, err := b.Get(ctx, replica.HeadKey("proj"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := replica.DecodeHead(replica.HeadKey("proj"), data)
	if err != nil {
		t.Fatal(err)
	}
	h.Holder.Host, h.Expires = "elsewhere", time.Now().Add(time.Hour).UTC().Round(0)
	if _, err := b.PutIfMatch(ctx, replica.HeadKey("proj"), h.Encode(), info.ETag); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "dest")
	cmd := exec.Command(os.Args[0], "clone", "--take", url+"#proj", dest)
	cmd.Env = append(os.Environ(), asCLI+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if !strings.HasPrefix(line, "waiting for the lease of elsewhere pid ") {
		t.Fatalf("clone --take said %q, %v; want the waiting line", line, err)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("interrupted clone --take: %v, want exit %d", err, exitInterrupted)
	}
	dstore, err := daemon.DefaultStore(dest)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dest, dstore} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("the interrupted take left %s: %v", p, err)
		}
	}
	if now, _, err := b.Get(ctx, replica.HeadKey("proj")); err != nil || string(now) != string(h.Encode()) {
		t.Fatalf("HEAD after the interrupted take: %s, %v", now, err)
	}
}
