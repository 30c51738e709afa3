package fs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
)

func TestRaiseReadahead(t *testing.T) {
	old := bdiDir
	bdiDir = t.TempDir()
	t.Cleanup(func() { bdiDir = old })
	conn := uint64(0)<<20 | 44 // device 0:44
	if got, want := bdiPath(conn), filepath.Join(bdiDir, "0:44", "read_ahead_kb"); got != want {
		t.Fatalf("bdiPath = %s, want %s", got, want)
	}
	if got := bdiPath(uint64(259)<<20 | 3); got != filepath.Join(bdiDir, "259:3", "read_ahead_kb") {
		t.Fatalf("bdiPath of 259:3 = %s", got)
	}
	p := bdiPath(conn)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f := &FS{conn: conn, log: zerolog.Nop()}
	for _, c := range []struct{ cur, want string }{
		{"128\n", "1024"},    // the kernel's FUSE default: raised
		{"4096\n", "4096\n"}, // larger already (an admin's): kept
	} {
		if err := os.WriteFile(p, []byte(c.cur), 0o644); err != nil {
			t.Fatal(err)
		}
		f.raiseReadahead(1024)
		if b, _ := os.ReadFile(p); string(b) != c.want {
			t.Errorf("read_ahead_kb %q after raiseReadahead(1024) = %q, want %q", c.cur, b, c.want)
		}
	}
	if readaheadKB != 4*maxRead>>10 || maxRead > maxWrite || maxRead <= 0 {
		t.Errorf("readaheadKB = %d, want four READs of maxRead %d (at most MaxWrite)", readaheadKB, maxRead)
	}
}
