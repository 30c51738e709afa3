package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind/replica"
)

// TestCloneLazyCLI: clone --lazy leaves the directory empty and the
// data on the remote; export and fsck of the unmounted lazy clone work
// (fetching what they read); bad flag combinations exit 2.
func TestCloneLazyCLI(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	proj := filepath.Join(t.TempDir(), "proj")
	writeTree(t, proj, map[string]string{"a.txt": "one\n", "sub/b.txt": strings.Repeat("b", 100000)})
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
	clone := filepath.Join(t.TempDir(), "lazy")
	if code := run([]string{"clone", "--lazy", "--prefetch=false", url + "#proj", clone}); code != 0 {
		t.Fatalf("clone --lazy: exit %d", code)
	}
	if names, err := os.ReadDir(clone); err != nil || len(names) != 0 {
		t.Errorf("the lazy clone's directory holds %v (%v); want it empty until mounted", names, err)
	}
	cstore, err := daemon.DefaultStore(clone)
	if err != nil {
		t.Fatal(err)
	}
	if !replica.IsLazy(daemon.DBPath(cstore)) {
		t.Fatal("the clone's store is not lazy")
	}
	// The directory is recorded as holding an empty tree (so the first
	// mount imports no deletions), with the live root's own attributes.
	j, err := journal.Open(daemon.DBPath(cstore), journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := j.GetMeta("dirbase")
	var in *cas.Inode
	if err == nil {
		var h cas.Hash
		if h, err = cas.Parse(string(b)); err == nil {
			var data []byte
			if data, err = j.Objects().Get(h); err == nil {
				in, err = cas.DecodeInode(data)
			}
		}
	}
	_ = j.Close()
	if err != nil || !in.IsDir() || len(in.Entries) != 0 {
		t.Fatalf("dirbase of the lazy clone: %v %+v; want an empty directory", err, in)
	}
	if code := run([]string{"fsck", clone}); code != 0 {
		t.Errorf("fsck of the lazy clone: exit %d", code)
	}
	e1, e2 := filepath.Join(t.TempDir(), "e1"), filepath.Join(t.TempDir(), "e2")
	if code := run([]string{"export", "first", e1, "--dir", proj}); code != 0 {
		t.Fatalf("export of the source: exit %d", code)
	}
	if code := run([]string{"export", "first", e2, "--dir", clone}); code != 0 {
		t.Fatalf("export of the lazy clone: exit %d", code)
	}
	diffR(t, e1, e2)
	for _, args := range [][]string{
		{"clone", "--prefetch=false", url + "#proj", filepath.Join(t.TempDir(), "x")},
		{"clone", "--lazy", "--take", url + "#proj", filepath.Join(t.TempDir(), "x")},
	} {
		if code := run(args); code != exitUsage {
			t.Errorf("reynfs %s: exit %d, want %d", strings.Join(args, " "), code, exitUsage)
		}
	}
}
