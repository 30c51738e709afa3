package main

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
)

// TestForgetGCRemote drives forget --remote and gc --remote on file://
// as a user does: three imports pushed; a clone's export of head before;
// forget up to g2 (big.bin, only in g1, is reached by nothing); a first
// gc condemns and deletes nothing, a second after the grace deletes; a
// new clone's export is the same tree (diff -r), fsck --remote is clean,
// and bad input exits 2 with one line.
func TestForgetGCRemote(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	proj := filepath.Join(t.TempDir(), "proj")
	big := make([]byte, 300000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	writeTree(t, proj, map[string]string{"a.txt": "one\n", "big.bin": string(big)})
	store, err := daemon.DefaultStore(proj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(store, 0o700); err != nil {
		t.Fatal(err)
	}
	db := daemon.DBPath(store)
	remote := t.TempDir()
	url := "file://" + remote
	// One push per import: big.bin's chunks get a pack of their own.
	importInto(t, db, proj, "first")
	if code := run([]string{"remote", "add", "origin", url, "--dir", proj}); code != 0 {
		t.Fatalf("remote add: exit %d", code)
	}
	pushed := func() {
		t.Helper()
		if code := run([]string{"push", "--dir", proj}); code != 0 {
			t.Fatalf("push: exit %d", code)
		}
	}
	pushed()
	if err := os.Remove(filepath.Join(proj, "big.bin")); err != nil {
		t.Fatal(err)
	}
	writeTree(t, proj, map[string]string{"a.txt": "two\n"})
	importInto(t, db, proj, "second")
	pushed()
	writeTree(t, proj, map[string]string{"c.txt": "three\n"})
	importInto(t, db, proj, "third")
	pushed()
	exportHead := func(name string) string {
		t.Helper()
		clone := filepath.Join(t.TempDir(), name)
		if code := run([]string{"clone", url + "#proj", clone}); code != 0 {
			t.Fatalf("clone: exit %d", code)
		}
		e := filepath.Join(t.TempDir(), "e-"+name)
		if code := run([]string{"export", "g3", e, "--dir", clone}); code != 0 {
			t.Fatalf("export g3 of %s: exit %d", name, code)
		}
		return e
	}
	before := exportHead("before")
	size := func() int64 {
		var n int64
		_ = filepath.Walk(filepath.Join(remote, "packs"), func(_ string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				n += fi.Size()
			}
			return nil
		})
		return n
	}
	packsBefore := size()

	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"forget", "g2", "--dir", proj}, exitUsage},                              // no --remote
		{[]string{"forget", "--remote", "origin", "g9", "--dir", proj}, exitUsage},        // no such generation
		{[]string{"forget", "--remote", "origin", "yesterday", "--dir", proj}, exitUsage}, // not a target
		{[]string{"forget", "--remote", "origin", "--ws", "a/b", "g2", "--dir", proj}, exitUsage},
		{[]string{"gc", "--remote", "origin", "--keep", "2", "--dir", proj}, exitUsage},
		{[]string{"gc", "--remote", "origin", "--grace", "-1h", "--dir", proj}, exitUsage},
		{[]string{"gc", "--grace", "1h", "--dir", proj}, exitUsage},  // --grace without --remote
		{[]string{"gc", "--repack=false", "--dir", proj}, exitUsage}, // --repack without --remote
		{[]string{"gc", "--remote", "origin", "--repack=false", "--dry-run", "--dir", proj}, 0},
	} {
		if code := run(c.args); code != c.code {
			t.Errorf("reynfs %s: exit %d, want %d", strings.Join(c.args, " "), code, c.code)
		}
	}
	code, out := runOut(t, "forget", "--remote", "origin", "g2", "--dir", proj)
	if code != 0 || !strings.Contains(out, "keeps history from g2") {
		t.Fatalf("forget: exit %d, %q", code, out)
	}
	time.Sleep(1100 * time.Millisecond) // the list is newer than the push (file mtimes, seconds)
	code, out = runOut(t, "gc", "--remote", "origin", "--dir", proj, "--json")
	var first struct {
		Condemned struct{ Packs int } `json:"condemned"`
		Deleted   struct{ Packs int } `json:"deleted"`
	}
	if err := json.Unmarshal([]byte(out), &first); code != 0 || err != nil || first.Condemned.Packs == 0 || first.Deleted.Packs != 0 {
		t.Fatalf("first gc: exit %d, %v, %q", code, err, out)
	}
	if size() != packsBefore {
		t.Fatal("the first gc deleted something")
	}
	time.Sleep(1100 * time.Millisecond)
	code, out = runOut(t, "gc", "--remote", "origin", "--grace", "1s", "--dir", proj)
	t.Logf("second gc:\n%s", out)
	if code != 0 || !strings.Contains(out, "deleted: ") || strings.Contains(out, "deleted: 0 packs") {
		t.Fatalf("second gc: exit %d, %q", code, out)
	}
	if size() >= packsBefore-300000/2 {
		t.Errorf("packs/ holds %d bytes, %d before: big.bin's pack is still there", size(), packsBefore)
	}
	diffR(t, before, exportHead("after"))
	if code, out := runOut(t, "fsck", "--remote", "origin", proj); code != 0 || !strings.Contains(out, "clean") {
		t.Fatalf("fsck --remote: exit %d, %q", code, out)
	}
}
