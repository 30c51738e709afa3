package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRepairTornWAL: a power cut can leave the Badger WAL a store was
// writing with a page that never reached the disk and later ones that did
// (the kernel writes a mapped file's dirty pages in any order). Mount
// refuses such a store, naming `reynfs fsck --repair`; the repair keeps a
// copy of the WAL, lets Badger cut it where its replay stops and catches
// the index up from the segment log; then the store mounts with every
// acknowledged byte and checks clean. A bit flip in the same WAL is
// repaired the same way.
func TestRepairTornWAL(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, wal string)
	}{
		{"zero-page", func(t *testing.T, wal string) {
			end := dataEnd(t, wal)
			off := (end / 2) &^ 4095
			if off < 4096 || off+4096 >= end {
				t.Fatalf("WAL %s holds %d bytes of data: too little to tear a page in its middle", wal, end)
			}
			f, err := os.OpenFile(wal, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(make([]byte, 4096), off); err != nil {
				t.Fatal(err)
			}
		}},
		{"flip", func(t *testing.T, wal string) { flip(t, wal, dataEnd(t, wal)*9/10) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, files := damageProject(t)
			m, head := historyThenKill(t, dir, files, false)
			if err := syscall.Unmount(m.Dir, syscall.MNT_DETACH); err != nil {
				t.Fatalf("detach the dead mount: %v", err)
			}
			wal := newestFile(t, m.Store, ".mem")
			if wal == "" {
				t.Fatal("no Badger WAL after kill -9")
			}
			c.damage(t, wal)

			r := m.Run("mount", dir, "--store", m.Store)
			noTrace(t, "mount", r)
			if r.Code != 4 || !strings.Contains(r.Stderr, "fsck --repair") {
				t.Fatalf("mount of a store with a torn WAL: exit %d, stderr %q; want exit 4 naming `fsck --repair`", r.Code, r.Stderr)
			}

			r = m.Run("fsck", "--store", m.Store, "--repair")
			noTrace(t, "fsck --repair", r)
			if r.Code != 0 || !strings.Contains(r.Stdout, "repaired:") || !strings.Contains(r.Stdout, "result:      clean") {
				t.Fatalf("fsck --repair: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			t.Logf("fsck --repair:\n%s", r.Stdout)
			copies, _ := filepath.Glob(filepath.Join(m.Store, "db.damaged-*", filepath.Base(wal)))
			if len(copies) != 1 {
				t.Fatalf("no copy of the damaged WAL kept beside the store (%v)", copies)
			}

			r = m.Run("fsck", "--store", m.Store, "--repair")
			if r.Code != 0 || !strings.Contains(r.Stdout, "nothing to repair") {
				t.Fatalf("a second fsck --repair: exit %d, want 0 and nothing to repair\n%s%s", r.Code, r.Stdout, r.Stderr)
			}

			m.skipFsck = false // the cleanup's fsck must find the repaired store clean
			m.Mount()
			for name, want := range head {
				if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s after the repair: %d bytes (%v), want %d", name, len(got), err, len(want))
				}
			}
			m.Unmount()
		})
	}
}
