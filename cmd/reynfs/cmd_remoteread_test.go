package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind/replica"
)

// runOut runs reynfs with args and returns its exit code and stdout.
func runOut(t *testing.T, args ...string) (int, string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	code := run(args)
	os.Stdout = saved
	_ = w.Close()
	out := <-done
	_ = r.Close()
	return code, out
}

// pushedProject makes a project with two imported states, names the
// file:// remote origin and pushes it; it returns the project and URL.
func pushedProject(t *testing.T) (proj, remote string) {
	t.Helper()
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	proj = filepath.Join(t.TempDir(), "proj")
	writeTree(t, proj, map[string]string{"a.txt": "one\n", "sub/b.txt": strings.Repeat("b", 100000)})
	store, err := daemon.DefaultStore(proj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(store, 0o700); err != nil {
		t.Fatal(err)
	}
	db := daemon.DBPath(store)
	importInto(t, db, proj, "first")
	remote = t.TempDir()
	for _, args := range [][]string{
		{"remote", "add", "origin", "file://" + remote, "--dir", proj},
		{"push", "--dir", proj},
	} {
		if code := run(args); code != 0 {
			t.Fatalf("reynfs %s: exit %d", strings.Join(args, " "), code)
		}
	}
	return proj, remote
}

// TestFsckRemoteCommand: a clean remote exits 0 with one summary line,
// by name and by URL; a flipped byte in a pack exits 1 with a DAMAGE
// line naming it; a directory holding no remote exits 4; --ws without
// --remote is bad input.
func TestFsckRemoteCommand(t *testing.T) {
	proj, remote := pushedProject(t)
	code, out := runOut(t, "fsck", "--remote", "origin", proj)
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "clean: 1 workspaces") {
		t.Fatalf("fsck --remote origin: exit %d, %q", code, out)
	}
	if code, _ := runOut(t, "fsck", "--remote", "file://"+remote, "--ws", "proj", "--json"); code != 0 {
		t.Fatalf("fsck --remote URL --ws: exit %d", code)
	}
	var pack string
	entries, _ := os.ReadDir(filepath.Join(remote, "packs"))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".pack") {
			pack = filepath.Join(remote, "packs", e.Name())
		}
	}
	data, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/3] ^= 1
	if err := os.WriteFile(pack, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = runOut(t, "fsck", "--remote", "file://"+remote)
	if code != exitFailure || !strings.Contains(out, "DAMAGE packs/"+filepath.Base(pack)+":") {
		t.Fatalf("fsck of a damaged remote: exit %d, %q", code, out)
	}
	if code := run([]string{"fsck", "--remote", "file://" + t.TempDir()}); code != exitStore {
		t.Errorf("fsck --remote of an empty directory: exit %d, want %d", code, exitStore)
	}
	if code := run([]string{"fsck", "--ws", "proj", proj}); code != exitUsage {
		t.Errorf("fsck --ws without --remote: exit %d, want %d", code, exitUsage)
	}
	if code := run([]string{"fsck", "--remote", "no/such", proj}); code != exitUsage {
		t.Errorf("fsck --remote with a bad name: exit %d, want %d", code, exitUsage)
	}
}

// TestCloneFetchLogStatus: clone, push more from the source, then the
// clone's status shows nothing pushed, fetch brings the new state (and
// the next fetch nothing), log --remote lists the workspace with its
// generations, and status of the source shows it shipped with no lag.
func TestCloneFetchLogStatus(t *testing.T) {
	proj, remote := pushedProject(t)
	url := "file://" + remote
	clone := filepath.Join(t.TempDir(), "copy")
	if code := run([]string{"clone", url + "#proj", clone}); code != 0 {
		t.Fatalf("clone: exit %d", code)
	}
	if code, out := runOut(t, "fetch", "--dir", clone); code != 0 || !strings.Contains(out, "up to date") {
		t.Fatalf("fetch with nothing new: exit %d, %q", code, out)
	}
	store, _ := daemon.DefaultStore(proj)
	writeTree(t, proj, map[string]string{"a.txt": "two\n", "c.txt": "new\n"})
	importInto(t, daemon.DBPath(store), proj, "second")
	code, out := runOut(t, "status", proj)
	if !strings.Contains(out, "remote:   origin#proj shipped seq") || !strings.Contains(out, "2 records behind") {
		t.Errorf("status before the push: exit %d, %q", code, out)
	}
	if code := run([]string{"push", "--dir", proj}); code != 0 {
		t.Fatalf("push: exit %d", code)
	}
	if _, out := runOut(t, "status", proj); !strings.Contains(out, "0 records behind") {
		t.Errorf("status after the push: %q", out)
	}
	code, out = runOut(t, "fetch", "--dir", clone, "--json")
	var res replica.FetchResult
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.From == 0 || res.Records != 2 {
		t.Fatalf("fetch: exit %d, %q (%v)", code, out, err)
	}
	e1, e2 := filepath.Join(t.TempDir(), "e1"), filepath.Join(t.TempDir(), "e2")
	if code := run([]string{"export", "second", e1, "--dir", proj}); code != 0 {
		t.Fatalf("export of the source: exit %d", code)
	}
	if code := run([]string{"export", "second", e2, "--dir", clone}); code != 0 {
		t.Fatalf("export of the fetched clone: exit %d", code)
	}
	diffR(t, e1, e2)
	if code := run([]string{"fsck", clone}); code != 0 {
		t.Fatalf("fsck of the fetched clone: exit %d", code)
	}
	checkInoCeil(t, clone)
	code, out = runOut(t, "log", "--remote", url)
	if code != 0 || !strings.Contains(out, "proj") || !strings.Contains(out, "epoch 1  free") || !strings.Contains(out, "2 generations, newest g2 \"second\"") {
		t.Fatalf("log --remote: exit %d, %q", code, out)
	}
	code, out = runOut(t, "log", "--remote", "origin", "--ws", "proj", "--dir", clone)
	if code != 0 || strings.Index(out, "g2 ") > strings.Index(out, "g1 ") || !strings.Contains(out, `"first"`) {
		t.Fatalf("log --remote --ws: exit %d, %q", code, out)
	}
	if code, out := runOut(t, "fetch", "--all", "--dir", clone, "--json"); code != 0 || !strings.Contains(out, `"name": "proj"`) {
		t.Fatalf("fetch --all: exit %d, %q", code, out)
	}
	if code := run([]string{"log", "--remote", url, "--wal"}); code != exitUsage {
		t.Errorf("log --remote --wal: exit %d, want %d", code, exitUsage)
	}
}

// TestFetchDiverged: a clone --at an older state holds a reset record of
// its own, so fetch refuses it, naming reynfs fork, and changes nothing.
func TestFetchDiverged(t *testing.T) {
	proj, remote := pushedProject(t)
	store, _ := daemon.DefaultStore(proj)
	writeTree(t, proj, map[string]string{"a.txt": "two\n"})
	importInto(t, daemon.DBPath(store), proj, "second")
	if code := run([]string{"push", "--dir", proj}); code != 0 {
		t.Fatalf("push: exit %d", code)
	}
	clone := filepath.Join(t.TempDir(), "copy")
	if code := run([]string{"clone", "file://" + remote + "#proj", clone, "--at", "first"}); code != 0 {
		t.Fatalf("clone: exit %d", code)
	}
	if code := run([]string{"fetch", "--dir", clone}); code != exitFailure {
		t.Fatalf("fetch into a diverged clone: exit %d, want %d", code, exitFailure)
	}
	if code := run([]string{"fetch", "nosuch", "--dir", clone}); code != exitUsage {
		t.Errorf("fetch of an unknown remote: exit %d, want %d", code, exitUsage)
	}
}

// checkInoCeil: the clone's inode ceiling is above every inode number
// its records name, the fetched ones included (the next mount hands out
// numbers above it).
func checkInoCeil(t *testing.T, dir string) {
	t.Helper()
	store, err := daemon.DefaultStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(daemon.DBPath(store), journal.Options{Logger: zerolog.Nop(), ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var used uint64
	if err := j.Iter(1, func(r *journal.Record) error { used = max(used, r.Ino, r.NextIno); return nil }); err != nil {
		t.Fatal(err)
	}
	b, err := j.GetMeta("inoceil")
	ceil, perr := strconv.ParseUint(string(b), 10, 64)
	if err != nil || perr != nil || ceil < used {
		t.Errorf("inode ceiling %q (%v) below %d, the highest number the records name", b, err, used)
	}
}
